"""Slack's agent messaging experience (`features.agent_view`): the app's Messages tab, what the
user is looking at, and agent sessions with a status, a title and a native stop button.

Opening the Messages tab (`app_home_opened`, `tab: "messages"`) pins the suggested prompts
(`assistant.threads.setSuggestedPrompts` without a thread) and is handed over as an event of
kind `opened`, which the conversation engine greets once per person. `app_context_changed`
says what the user is looking at; the entities ride along with that user's next DM. The stop
button (`agent_session_stopped`) is handed over as `/cancel` from the person who pressed it,
in the conversation of the session's thread.

A session is a thread: a run's session is its thread, or in a DM the message that asked.
`session_status` maps the run's state onto Slack's four session statuses: "processing" while a
run works, "suspended" while it waits for a person, "active" after an answer or a stop (Slack
does not move a stopped session by itself), "closed" only when the conversation ends. The
title and the initiator are given once, when the session is created: a later run in the same
thread sends neither, so a person's rename stays.

Which conversation a DM session belongs to (its thread, or the DM itself) is kept in a
`SessionDirectory` (Redis, in the service) when the session begins, so a stop pressed after a
restart or at another gateway, and the status of a top-level DM run resumed by a button
press, still find it; what this process saw is the fallback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import Actor, ConversationKey, Inbound, InboundMessage, SessionState
from adapters.slack.config import SlackConfig
from adapters.slack.traits import event_id

log = logging.getLogger(__name__)

SLACK_STATUS: dict[SessionState, str] = {
    "working": "processing",  # shows Slack's stop button
    "waiting": "suspended",  # a question or an approval waits for a person
    "done": "active",  # answered: the conversation goes on
    "stopped": "active",  # Slack leaves a stopped session as it was: out of "processing"
    "ended": "closed",  # the person cancelled what waited, or it expired
}
CALL_TIMEOUT = 2.0  # seconds for a status or prompts call: a nicety, never worth a wait
TITLE_CHARS = 60
MAX_REMEMBERED = 10_000  # sessions and contexts remembered per process; oldest forgotten first


class SessionDirectory(Protocol):
    """Where agent sessions live, shared by every process (bot/features/agent_sessions.py)."""

    async def began(self, conversation: ConversationKey, session_ts: str) -> None: ...

    async def created(self, conversation: ConversationKey, session_ts: str) -> bool | None:
        """Whether this call created the session (None: not known)."""
        ...

    async def session_of(self, conversation: ConversationKey) -> str | None: ...

    async def thread_of(self, session: ConversationKey) -> tuple[bool, str | None]: ...


@dataclass(kw_only=True)
class AgentSurface:
    config: SlackConfig
    client: AsyncWebClient
    accepting: Callable[[], bool]  # whether anything takes events (a handler is set)
    hand_over: Callable[[Inbound], Awaitable[None]]
    directory: SessionDirectory | None = None
    # user -> what they are looking at, as Slack's entities (newest app_context_changed)
    looking_at: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # (DM channel, session thread) -> the conversation's thread (None: the DM itself)
    dm_sessions: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # conversation id -> the thread of its newest session (a top-level DM run's message)
    anchors: dict[str, str] = field(default_factory=dict)
    # sessions this process created (the fallback when the directory cannot say)
    created: dict[tuple[str, str], None] = field(default_factory=dict)

    def register(self, app: AsyncApp) -> None:
        """Before the adapter's catch-all listener: Bolt runs the first that matches."""
        app.event("app_home_opened")(self._opened)
        app.event("app_context_changed")(self._context_changed)
        app.event("agent_session_stopped")(self._stopped)

    # --- events in ----------------------------------------------------------------------------

    async def _opened(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if event.get("tab") != "messages":
            return
        user, channel = _text(event, "user"), _text(event, "channel")
        team, enterprise = _text(body, "team_id"), _text(body, "enterprise_id")
        if not user or not channel or not self.config.admits(team, channel, enterprise):
            log.info(
                "slack %s not answered: no user or channel, or not on the allowlists",
                event.get("type"),
            )
            return
        if not self.accepting():
            return
        await self.hand_over(
            InboundMessage(
                event_id=event_id(body.get("event_id") or event.get("event_ts")),
                conversation=ConversationKey(platform="slack", chat_id=channel, team_id=team),
                actor=Actor(platform="slack", user_id=user, team_id=team, enterprise_id=enterprise),
                text="",
                is_direct=True,
                kind="opened",
            )
        )
        await self._pin_prompts(channel)

    async def _context_changed(
        self, event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        user = _text(event, "user") or context.user_id
        entities = (event.get("context") or {}).get("entities") if isinstance(event, dict) else None
        if not user or not isinstance(entities, list):
            return
        self.looking_at[str(user)] = [e for e in entities[:5] if isinstance(e, dict)]
        _bound(self.looking_at)

    async def _stopped(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        user, channel = _text(event, "user"), _text(event, "channel")
        thread = _text(event, "thread_ts")
        team, enterprise = _text(body, "team_id"), _text(body, "enterprise_id")
        if not user or not channel or not self.config.admits(team, channel, enterprise):
            log.info(
                "slack %s not answered: no user or channel, or not on the allowlists",
                event.get("type"),
            )
            return
        if not self.accepting():
            return
        direct = channel.startswith("D")
        conversation = ConversationKey(
            platform="slack", chat_id=channel, thread_id=thread, team_id=team
        )
        if direct and thread is not None:
            conversation = replace(conversation, thread_id=await self._dm_thread(conversation))
        await self.hand_over(
            InboundMessage(
                event_id=event_id(body.get("event_id") or event.get("event_ts")),
                conversation=conversation,
                actor=Actor(platform="slack", user_id=user, team_id=team, enterprise_id=enterprise),
                text="stop",
                is_direct=direct,
                command="cancel",
            )
        )

    # --- what the adapter's other parts ask ---------------------------------------------------

    def saw_dm(self, channel: str, ts: str, thread: str | None) -> None:
        """A DM message arrived: its session is its thread, or the message itself."""
        self.dm_sessions[(channel, thread or ts)] = thread
        _bound(self.dm_sessions)

    def with_context(self, user: str, channel: str, thread: str | None, text: str) -> str:
        """The message text, with what the user is looking at when Slack said so."""
        seen = [_describe(e) for e in self.looking_at.get(user, [])]
        seen = [s for s in seen if s]
        if not seen:
            return text
        return f"{text}\n\n(I am looking at {', '.join(seen)}.)"

    async def asked(self, channel: str, thread: str | None, text: str) -> None:
        """Nothing after the message: a session's title comes with its status."""

    async def _dm_thread(self, session: ConversationKey) -> str | None:
        """The thread of the conversation a DM session (`session.thread_id`) belongs to."""
        assert session.thread_id is not None
        if self.directory is not None:
            known, thread = await self.directory.thread_of(session)
            if known:
                return thread
        # a DM's own run: no thread
        return self.dm_sessions.get((session.chat_id, session.thread_id))

    async def _session_thread(
        self, conversation: ConversationKey, message_id: str | None
    ) -> str | None:
        """The run's session: its thread, the message that began it, or (a run resumed by a
        press or an answer in a DM without threads) the session its conversation began."""
        thread = conversation.thread_id or message_id
        if thread is not None:
            return thread
        if self.directory is not None and (known := await self.directory.session_of(conversation)):
            return known
        return self.anchors.get(conversation.id)

    async def session_status(
        self,
        conversation: ConversationKey,
        message_id: str | None,
        state: SessionState,
        title: str | None,
        initiator: str | None = None,
    ) -> None:
        """`message_id`: the message that began a new run; None for a resumed one.
        `initiator`: who asked, named to Slack when the session is created."""
        thread = await self._session_thread(conversation, message_id)
        if thread is None:
            return
        creating = message_id is not None and state == "working"
        if creating:
            creating = await self._creates(conversation, thread)
        if creating and conversation.chat_id.startswith("D"):
            self.anchors[conversation.id] = thread
            self.dm_sessions[(conversation.chat_id, thread)] = conversation.thread_id
            _bound(self.anchors)
            if self.directory is not None:
                await self.directory.began(conversation, thread)
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                await self.client.agents_sessions_setStatus(
                    channel_id=conversation.chat_id,
                    thread_ts=thread,
                    status=SLACK_STATUS[state],
                    title=_title(title) if title and creating else None,
                    initiator_user_id=initiator if creating else None,
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("no agent session status (%s)", _reason(exc))

    async def _creates(self, conversation: ConversationKey, thread: str) -> bool:
        """Whether the session at `thread` is new: an earlier run in the thread created it."""
        known = (conversation.chat_id, thread)
        fresh = None
        if self.directory is not None:
            fresh = await self.directory.created(conversation, thread)
        if fresh is None:
            fresh = known not in self.created
        self.created[known] = None
        _bound(self.created)
        return fresh

    async def _pin_prompts(self, channel: str) -> None:
        prompts = self.config.suggested_prompts
        if not prompts:
            return
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                await self.client.api_call(
                    "assistant.threads.setSuggestedPrompts",
                    json={
                        "channel_id": channel,
                        "prompts": [{"title": p, "message": p} for p in prompts],
                    },
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("no suggested prompts (%s)", _reason(exc))


def _text(data: object, name: str) -> str | None:
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def _describe(entity: dict[str, Any]) -> str:
    kind, value = entity.get("type"), entity.get("value")
    if not isinstance(value, str) or not value.isalnum():
        return ""
    if kind == "slack#/types/channel_id":
        return f"the channel <#{value}>"
    if kind == "slack#/types/user_id":
        return f"the profile of <@{value}>"
    return ""


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def _reason(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or "error")
    return type(exc).__name__


def _bound(remembered: dict[Any, Any]) -> None:
    while len(remembered) > MAX_REMEMBERED:
        del remembered[next(iter(remembered))]
