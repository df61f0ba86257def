"""Slack answers while they are written, through slack_sdk's `chat_stream` (chat.startStream,
chat.appendStream, chat.stopStream), naming the recipient user and team as Slack requires.

Slack refuses some streams (`missing_recipient_team_id`, `user_not_found` for Slack Connect
users, rate limits). Any refusal, at start, append or stop, ends the streaming; `finish` then
replaces the half message with the whole answer (chat.update) or, if there is none, posts an
ordinary message — so the reply is never lost and never doubled.

What is streamed passes the same mention rule as a post (`streamed_markdown`): only the
mentions the requester typed may ping.

On the agent surface, tool steps are task updates (`task_update` chunks); a run that carries
out an approved plan opens its stream in plan display (`task_display_mode="plan"`) with a
`plan_update` chunk naming the plan and one pending task per step, which its steps then move
on (in_progress, complete or error).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from slack_sdk.errors import SlackClientError
from slack_sdk.models.messages.chunk import Chunk, PlanUpdateChunk, TaskUpdateChunk
from slack_sdk.web.async_chat_stream import AsyncChatStream
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ConversationKey, MessageRef, OutboundMessage
from adapters.platform import LiveMessage
from adapters.slack.agent import SLACK_STATUS
from adapters.slack.delivery import error_code as _error
from adapters.slack.format import allowed_keys, streamed_markdown

log = logging.getLogger(__name__)

APPEND_LIMIT = 12_000  # characters of markdown_text Slack takes per call
# A final answer ends the run; chat.stopStream says so explicitly ("active": the conversation
# goes on), rather than relying on Slack's default.
ENDED = SLACK_STATUS["done"]


@dataclass(kw_only=True)
class SlackLive(LiveMessage):
    client: AsyncWebClient
    # the adapter's own post and edit, for an answer that cannot end as a stream
    send: Callable[[ConversationKey, OutboundMessage], Awaitable[MessageRef]]
    edit: Callable[[MessageRef, OutboundMessage], Awaitable[None]]
    conversation: ConversationKey
    thread_ts: str
    user_id: str
    team_id: str | None
    allowed_mentions: frozenset[str] = frozenset()  # tokens that may ping, as on the reply
    tasks: bool = False  # show tool steps as task updates (the agent messaging surface)
    _stream: AsyncChatStream | None = None
    _sent: str = ""  # as rendered for Slack
    _broken: bool = False

    @property
    def message_id(self) -> str | None:
        return self._stream.ts if self._stream is not None else None

    @property
    def min_interval(self) -> float:
        return 0.0  # the caller's interval keeps appends well inside Slack's limits

    @property
    def shows_steps(self) -> bool:
        return self.tasks

    async def show(self, text: str) -> None:
        text = streamed_markdown(text, allowed_keys(self.allowed_mentions), final=False)
        if self._broken or not text.startswith(self._sent):
            return
        new = text[len(self._sent) :][:APPEND_LIMIT]
        if not new:
            return
        try:
            stream = await self._started()
            await stream.append(markdown_text=new)
            self._sent += new
        except SlackClientError as exc:
            self._broken = True
            log.warning("Slack refused the stream (%s); the answer will arrive whole", _error(exc))

    async def _started(self, display: str = "timeline") -> AsyncChatStream:
        if self._stream is None:
            # buffer_size=1: every append goes out; the caller already throttles
            self._stream = await self.client.chat_stream(
                channel=self.conversation.chat_id,
                thread_ts=self.thread_ts,
                recipient_user_id=self.user_id,
                recipient_team_id=self.team_id,
                buffer_size=1,
                task_display_mode=display if self.tasks else None,
            )
        return self._stream

    async def plan(self, title: str, steps: list[tuple[str, str, str]]) -> None:
        """A plan being carried out: its title and its steps (id, title, status) as one
        plan block; never raises."""
        if not self.tasks or self._broken:
            return
        chunks: list[Chunk] = [PlanUpdateChunk(title=title)]
        chunks += [TaskUpdateChunk(id=i, title=t, status=status) for i, t, status in steps]
        try:
            stream = await self._started("plan")
            await stream.append(chunks=chunks)
        except SlackClientError as exc:
            self._broken = True
            log.warning("Slack refused a plan update (%s); the answer arrives whole", _error(exc))

    async def task(self, task_id: str, title: str, status: str) -> None:
        """A tool step as a task update chunk (slack_sdk 3.47); never raises."""
        if not self.tasks or self._broken:
            return
        try:
            stream = await self._started()
            chunk = TaskUpdateChunk(id=task_id, title=title, status=status)
            await stream.append(chunks=[chunk])
        except SlackClientError as exc:
            self._broken = True
            log.warning("Slack refused a task update (%s); the answer arrives whole", _error(exc))

    async def reset(self, status: str | None) -> None:
        await self.discard()  # the status itself shows through assistant.threads.setStatus

    async def discard(self) -> None:
        stream, self._stream, self._sent = self._stream, None, ""
        if stream is None or stream.ts is None:
            return
        client = self.client
        try:
            if not self._broken:
                await stream.stop()
            await client.chat_delete(channel=self.conversation.chat_id, ts=stream.ts)
        except SlackClientError as exc:
            log.warning("could not take back a streamed message (%s)", _error(exc))
        self._broken = False

    async def finish(self, message: OutboundMessage) -> MessageRef:
        stream = self._stream
        text = streamed_markdown(message.text, allowed_keys(message.allowed_mentions), final=True)
        if stream is not None and stream.ts is not None and not self._broken:
            rest = text[len(self._sent) :] if text.startswith(self._sent) else None
            try:
                ended = ENDED if self.tasks else None  # only the agent surface has sessions
                if rest is not None and len(rest) <= APPEND_LIMIT:
                    await stream.stop(markdown_text=rest or None, session_status=ended)
                    return MessageRef(conversation=self.conversation, message_id=stream.ts)
                await stream.stop(session_status=ended)
            except SlackClientError as exc:
                log.warning("Slack refused to end the stream (%s); replacing it", _error(exc))
        if stream is not None and stream.ts is not None:
            ref = MessageRef(conversation=self.conversation, message_id=stream.ts)
            try:
                await self.edit(ref, message)
                return ref
            except SlackClientError as exc:
                log.warning("could not replace the streamed message (%s)", _error(exc))
                try:
                    await self.client.chat_delete(channel=self.conversation.chat_id, ts=stream.ts)
                except SlackClientError:
                    pass
        return await self.send(self.conversation, message)
