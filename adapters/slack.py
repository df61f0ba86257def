"""Slack on slack-bolt's AsyncApp: events, button presses and /parley in, Block Kit out.

HTTP mode verifies the signing secret and the 5-minute timestamp window (Bolt does both);
Socket Mode starts when an app token is set. Bolt acknowledges first and the handler only
queues, so Slack always gets its answer well inside 3 s. At the edge: allowlists of teams
and channels, bots, edits and joins ignored, over-long messages answered politely.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    Actor,
    Attachment,
    ContextMessage,
    ConversationKey,
    InboundAction,
    InboundHandler,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
)
from adapters.slack_context import ThreadReader, download, files_of
from adapters.slack_format import messages
from adapters.text import too_long

log = logging.getLogger(__name__)

IGNORED_SUBTYPES = {
    "bot_message",
    "message_changed",
    "message_deleted",
    "channel_join",
    "channel_leave",
    "group_join",
    "group_leave",
    "thread_broadcast",
    "channel_topic",
    "channel_purpose",
    "channel_name",
}
GROUP_CACHE_SECONDS = 300.0


@dataclass(frozen=True, kw_only=True)
class SlackConfig:
    bot_token: str
    signing_secret: str | None = None
    app_token: str | None = None
    api_url: str = "https://slack.com/api/"
    allowed_teams: tuple[str, ...] = ()
    allowed_channels: tuple[str, ...] = ()
    approver_groups: tuple[str, ...] = ()
    max_message_chars: int = 4000


@dataclass(kw_only=True)
class SlackAdapter:
    config: SlackConfig
    handler: InboundHandler | None = None
    platform: Platform = "slack"
    client: AsyncWebClient = field(init=False)
    app: AsyncApp = field(init=False)
    bot_user_id: str | None = field(default=None, init=False)
    _socket: Any = field(default=None, init=False)
    _groups: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict, init=False)
    _threads: ThreadReader = field(init=False)

    def __post_init__(self) -> None:
        self.client = AsyncWebClient(
            token=self.config.bot_token,
            base_url=self.config.api_url,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)],
        )
        self._threads = ThreadReader(client=self.client)
        self.app = AsyncApp(
            client=self.client,
            signing_secret=self.config.signing_secret or "",
            request_verification_enabled=self.config.app_token is None,
            ignoring_self_events_enabled=True,
        )
        self.app.event("message")(self._on_message_event)
        self.app.event("app_mention")(self._on_mention)
        self.app.action(re.compile(r"^parley:"))(self._on_action)
        self.app.command("/parley")(self._on_command)

    # --- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        if self.bot_user_id is None:
            auth = await self.client.auth_test()
            self.bot_user_id = str(auth.get("user_id") or "")

    async def start(self) -> None:
        await self.initialize()
        if self.config.app_token:
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            self._socket = AsyncSocketModeHandler(self.app, self.config.app_token)
            await self._socket.connect_async()

    async def stop_receiving(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close_async()

    async def stop(self) -> None:
        await self.stop_receiving()

    def slack_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/slack/events", self._http

    async def _http(self, request: web.Request) -> web.Response:
        try:
            bolt_request = await to_bolt_request(request)
        except Exception:
            return web.Response(status=400, text="malformed request")
        return await to_aiohttp_response(await self.dispatch(bolt_request))

    async def dispatch(self, request: AsyncBoltRequest) -> BoltResponse:
        """Bolt's dispatch; a payload Bolt cannot read is a 400, not a crash."""
        try:
            return await self.app.async_dispatch(request)
        except Exception:
            log.warning("unreadable Slack request (%d bytes)", len(request.raw_body or ""))
            return BoltResponse(status=400, body="malformed request")

    # --- platform events in -----------------------------------------------------------------

    def _allowed(self, team: str | None, channel: str | None) -> bool:
        if self.config.allowed_teams and team not in self.config.allowed_teams:
            return False
        return not (self.config.allowed_channels and channel not in self.config.allowed_channels)

    async def _on_message_event(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if event.get("subtype") in IGNORED_SUBTYPES or event.get("bot_id"):
            return
        channel_type = event.get("channel_type")
        text = str(event.get("text") or "")
        mention = f"<@{self.bot_user_id}>" if self.bot_user_id else None
        if channel_type == "im":
            await self._message(event, body, direct=True, mentioned=True)
        elif event.get("thread_ts") and not (mention and mention in text):
            # A reply in a thread: Parley's only if the thread is already its conversation.
            await self._message(event, body, direct=False, mentioned=False)

    async def _on_mention(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if event.get("bot_id"):
            return
        await self._message(event, body, direct=False, mentioned=True)

    async def _message(
        self, event: dict[str, Any], body: dict[str, Any], *, direct: bool, mentioned: bool
    ) -> None:
        user = event.get("user")
        channel = event.get("channel")
        if not isinstance(user, str) or not user or user == self.bot_user_id:
            return
        if not isinstance(channel, str) or not channel or not event.get("ts"):
            return  # not a message Slack would send; nothing to answer into
        team = body.get("team_id") or event.get("team")
        if not self._allowed(team, channel):
            return
        ts = str(event.get("ts") or "")
        thread = event.get("thread_ts") or (None if direct else ts)
        conversation = ConversationKey(
            platform="slack", chat_id=channel, thread_id=thread, team_id=team
        )
        text = self._strip_mention(str(event.get("text") or "")).strip()
        if len(text) > self.config.max_message_chars:
            await self.client.chat_postMessage(
                channel=channel,
                thread_ts=thread,
                text=too_long(len(text), self.config.max_message_chars),
            )
            return
        if self.handler is None:
            return
        await self.handler(
            InboundMessage(
                event_id=f"slack:{body.get('event_id') or ts}",
                conversation=conversation,
                actor=Actor(platform="slack", user_id=str(user), team_id=team),
                text=text,
                is_direct=direct,
                message_id=ts,
                mentioned=mentioned,
                attachments=files_of(event),
            )
        )

    def _strip_mention(self, text: str) -> str:
        return text.replace(f"<@{self.bot_user_id}>", "") if self.bot_user_id else text

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        action = (body.get("actions") or [{}])[0]
        decision_id, _, choice = str(action.get("value") or "").rpartition(":")
        user = str((body.get("user") or {}).get("id") or "")
        team = (body.get("team") or {}).get("id") or (body.get("user") or {}).get("team_id")
        channel = str((body.get("channel") or {}).get("id") or "")
        message = body.get("message") or {}
        if not decision_id or not user or not channel or not self._allowed(team, channel):
            return
        direct = channel.startswith("D")
        thread = message.get("thread_ts") or (None if direct else message.get("ts"))
        conversation = ConversationKey(
            platform="slack", chat_id=channel, thread_id=thread, team_id=team
        )
        if self.handler is None:
            return
        await self.handler(
            InboundAction(
                event_id=f"slack:action:{action.get('action_ts')}:{user}",
                conversation=conversation,
                actor=Actor(
                    platform="slack",
                    user_id=user,
                    team_id=team,
                    groups=await self._groups_of(user),
                ),
                decision_id=decision_id,
                choice=choice,
                message=MessageRef(conversation=conversation, message_id=str(message.get("ts"))),
                is_direct=direct,
            )
        )

    async def _groups_of(self, user: str) -> tuple[str, ...]:
        """Which of the approver user groups the user belongs to (cached briefly)."""
        found = []
        now = time.monotonic()
        for group in self.config.approver_groups:
            cached = self._groups.get(group)
            if cached is None or now - cached[0] > GROUP_CACHE_SECONDS:
                try:
                    response = await self.client.usergroups_users_list(usergroup=group)
                    members = frozenset(str(u) for u in response.get("users") or [])
                except SlackApiError as exc:
                    log.warning("cannot read user group %s: %s", group, exc.response.get("error"))
                    members = frozenset()
                cached = (now, members)
                self._groups[group] = cached
            if user in cached[1]:
                found.append(group)
        return tuple(found)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        channel = str(command.get("channel_id") or "")
        team = command.get("team_id")
        if not self._allowed(team, channel) or self.handler is None:
            return
        name, _, args = str(command.get("text") or "").strip().partition(" ")
        conversation = ConversationKey(platform="slack", chat_id=channel, team_id=team)
        await self.handler(
            InboundMessage(
                event_id=f"slack:command:{command.get('trigger_id')}",
                conversation=conversation,
                actor=Actor(platform="slack", user_id=str(command.get("user_id")), team_id=team),
                text=str(command.get("text") or ""),
                is_direct=channel.startswith("D"),
                command=(name or "help").lower(),
                args=args.strip(),
            )
        )

    # --- neutral events out -----------------------------------------------------------------

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        ts = ""
        for fallback, blocks in messages(message):
            if message.private_to:
                response = await self.client.chat_postEphemeral(
                    channel=conversation.chat_id,
                    user=message.private_to,
                    thread_ts=conversation.thread_id,
                    text=fallback,
                    blocks=blocks,
                )
                ts = str(response.get("message_ts") or "")
            else:
                response = await self.client.chat_postMessage(
                    channel=conversation.chat_id,
                    thread_ts=conversation.thread_id,
                    text=fallback,
                    blocks=blocks,
                    unfurl_links=False,
                )
                ts = str(response.get("ts") or "")
        return MessageRef(conversation=conversation, message_id=ts)

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        fallback, blocks = messages(message)[0]
        await self.client.chat_update(
            channel=ref.conversation.chat_id, ts=ref.message_id, text=fallback, blocks=blocks
        )

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        if not alert:
            return  # the edited message already shows the decision
        await self.client.chat_postEphemeral(
            channel=action.conversation.chat_id,
            user=action.actor.user_id,
            thread_ts=action.conversation.thread_id,
            text=text,
        )

    async def download(self, attachment: Attachment, limit: int) -> bytes:
        return await download(self.config.bot_token, self.config.api_url, attachment, limit)

    async def thread_history(
        self, conversation: ConversationKey, before: str
    ) -> list[ContextMessage]:
        if conversation.thread_id is None:
            return []
        await self.initialize()  # a worker-only process has not asked who the bot is yet
        return await self._threads.history(
            conversation.chat_id, conversation.thread_id, before, self.bot_user_id
        )

    async def read_channel(self, user_id: str, channel: str, oldest: float) -> list[ContextMessage]:
        await self.initialize()
        return await self._threads.channel(user_id, channel, oldest, self.bot_user_id)

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        if conversation.thread_id is None:
            return
        try:
            await self.client.api_call(
                "assistant.threads.setStatus",
                json={
                    "channel_id": conversation.chat_id,
                    "thread_ts": conversation.thread_id,
                    "status": status or "",
                },
            )
        except SlackApiError as exc:  # not an assistant thread, or the scope is missing
            log.debug("no thread status: %s", exc.response.get("error"))
