"""Slack on slack-bolt's AsyncApp: events, button presses and /parley in, Block Kit out.

HTTP mode verifies the signing secret and the 5-minute timestamp window (slack_sdk's
`SignatureVerifier`, before Bolt sees the request); Socket Mode starts when an app token is
set. Bolt runs the listener before it answers (`process_before_response`), and the listener
only queues, so an event is stored before Slack's 200 or Socket Mode ack and still well
inside Slack's 3 s. When the handler cannot store it (`HandoverFailed`, or no answer within
`handover_timeout`) Slack gets a 503 or no ack and sends the event again; the inbox answers a
repeated event id once. At the edge: allowlists of teams and channels; bots, Slackbot, edits,
joins and events with mistyped fields ignored; everything Parley does not handle
acknowledged quietly; over-long and empty messages answered politely.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    Actor,
    Attachment,
    ContextMessage,
    ConversationKey,
    DeliveryFailed,
    HandoverFailed,
    Inbound,
    InboundAction,
    InboundHandler,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
)
from adapters.slack_assistant import AssistantThreads
from adapters.slack_context import ThreadReader, download, files_of
from adapters.slack_format import messages
from adapters.slack_stream import SlackLive
from adapters.text import too_long

log = logging.getLogger(__name__)

# Message subtypes a person writes; every other subtype (bot posts, edits, joins, topic
# changes, …) is ignored. A thread reply also sent to the channel is still a thread reply.
USER_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}
SLACKBOT = "USLACKBOT"  # Slack's own notices in a DM ("You have been removed from #…")
HELP_LINE = (
    "Tell me what you need in the same message, e.g. “@Parley what's on today?” "
    "— `/parley help` lists my commands."
)
HELP_LINE_DIRECT = "Tell me what you need in words — `/parley help` lists my commands."
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
GROUP_LOOKUP_TIMEOUT = 1.0  # seconds
PRESS_NOT_TAKEN = "I couldn't take that press just now — please press the button again in a minute."
PRESS_NOTE_TIMEOUT = 0.8  # seconds: said before the answer, still inside Slack's 3 s
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
    handover_timeout: float = 2.0  # seconds to store an event, inside Slack's 3 s
    greeting: str = "Hi! I'm Parley. What can I do for you?"
    suggested_prompts: tuple[str, ...] = ()


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
    _trouble: str | None = field(default=None, init=False)
    _threads: ThreadReader = field(init=False)
    # DM channel -> the ts of the latest message there: where the assistant status shows
    _dm_threads: dict[str, str] = field(default_factory=dict, init=False)
    assistant: AssistantThreads = field(init=False)

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
            request_verification_enabled=False,  # done in _http, with a bounded log line
            ignoring_self_events_enabled=True,
            process_before_response=True,  # stored first, then acknowledged
        )
        self.app.error(self._on_error)
        self.assistant = AssistantThreads(
            client=self.client,
            greeting=self.config.greeting,
            prompts=self.config.suggested_prompts,
        )
        self.app.assistant(self.assistant.middleware())
        self.app.event("message")(self._on_message_event)
        self.app.event("app_mention")(self._on_mention)
        self.app.action(re.compile(r"^parley:"))(self._on_action)
        self.app.command("/parley")(self._on_command)
        # Other events and commands are acknowledged and dropped, not left to Bolt's 404
        # (which Slack retries) and its "unhandled request" warning with the payload.
        anything = re.compile(r".*")
        self.app.event(anything)(self._ignore_event)
        self.app.action(anything)(self._ignore)
        self.app.command(anything)(self._ignore)

    # --- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        if self.client.session is None:
            # one session for every Web API call: without it slack_sdk opens a connection per
            # call, which a streamed answer (start, appends, stop) pays several times over
            self.client.session = aiohttp.ClientSession()
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
        session, self.client.session = self.client.session, None
        if session is not None:
            await session.close()

    def slack_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/slack/events", self._http

    async def _http(self, request: web.Request) -> web.Response:
        body = await request.read()
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        if timestamp and not _TIMESTAMP.fullmatch(timestamp):
            log.info("refused a Slack request: %s", _summary(request, body))
            return web.Response(status=400, text="malformed timestamp")
        if not self._signed(body, timestamp, request.headers.get("X-Slack-Signature", "")):
            log.info("refused a Slack request with no valid signature: %s", _summary(request, body))
            return web.Response(status=401, text="invalid signature")
        try:
            bolt_request = await to_bolt_request(request)
        except Exception:
            return web.Response(status=400, text="malformed request")
        return await to_aiohttp_response(await self.dispatch(bolt_request))

    def _signed(self, body: bytes, timestamp: str, signature: str) -> bool:
        """Slack's v0 signature, within its 5-minute window."""
        if not self.config.signing_secret or not timestamp or not signature:
            return False
        try:
            verifier = SignatureVerifier(self.config.signing_secret)
            return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
        except (UnicodeDecodeError, ValueError):
            return False

    async def dispatch(self, request: AsyncBoltRequest) -> BoltResponse:
        """Bolt's dispatch; a payload Bolt cannot read is a 400, not a crash."""
        try:
            kind = request.body.get("type")
            if kind == "app_rate_limited":
                log.warning("Slack reports it is holding back events for this app (rate limited)")
                return BoltResponse(status=200, body="")
            if isinstance(kind, str) and kind in NOT_PARLEYS:
                return BoltResponse(status=200, body="")
            problem = _malformed(request.body)
            if problem is not None:
                log.warning("refused a Slack request: %s", problem)
                return BoltResponse(status=400, body="malformed request")
            return await self.app.async_dispatch(request)
        except Exception:
            log.warning("unreadable Slack request (%d bytes)", len(request.raw_body or ""))
            return BoltResponse(status=400, body="malformed request")

    async def _on_error(
        self, error: Exception, response: BoltResponse | None
    ) -> BoltResponse | None:
        """Not stored: 503, so Slack sends the event again (Socket Mode: no ack).

        A payload Bolt trips over while matching it is a 400 and one log line.
        """
        if isinstance(error, HandoverFailed):
            if self._trouble is None:
                log.warning("Slack events are refused for now (%s); Slack will retry", error)
            self._trouble = str(error)
            return BoltResponse(status=503, body="try again") if response is not None else None
        if isinstance(error, LookupError | TypeError | AttributeError | ValueError):
            log.warning("refused a Slack payload Bolt cannot read (%s)", type(error).__name__)
            return BoltResponse(status=400, body="malformed request")
        log.error("Slack request failed", exc_info=error)
        return None  # Bolt answers 500

    async def _hand_over(self, event: Inbound) -> None:
        assert self.handler is not None
        try:
            async with asyncio.timeout(self.config.handover_timeout):
                await self.handler(event)
        except TimeoutError as exc:
            raise HandoverFailed("the handler did not answer in time") from exc
        if self._trouble is not None:
            log.info("Slack events are stored again")
            self._trouble = None

    # --- platform events in -----------------------------------------------------------------

    def _allowed(self, team: str | None, channel: str | None) -> bool:
        if self.config.allowed_teams and team not in self.config.allowed_teams:
            return False
        return not (self.config.allowed_channels and channel not in self.config.allowed_channels)

    async def _on_message_event(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if not _well_typed(event, body):
            return
        if event.get("subtype") not in USER_SUBTYPES or event.get("bot_id"):
            return
        channel_type = event.get("channel_type")
        text = event.get("text") or ""
        mention = f"<@{self.bot_user_id}>" if self.bot_user_id else None
        if channel_type == "im":
            await self._message(event, body, direct=True, mentioned=True)
        elif event.get("thread_ts") and not (mention and mention in text):
            # A reply in a thread: Parley's only if the thread is already its conversation.
            await self._message(event, body, direct=False, mentioned=False)

    async def _on_mention(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if event.get("bot_id") or not _well_typed(event, body):
            return
        await self._message(event, body, direct=False, mentioned=True)

    async def _ignore_event(self, body: dict[str, Any]) -> None:
        """Events Parley does not act on (reactions, joins, app home, …): acknowledged only."""

    async def _ignore(self, ack: Any) -> None:
        await ack()

    async def _message(
        self, event: dict[str, Any], body: dict[str, Any], *, direct: bool, mentioned: bool
    ) -> None:
        user = event.get("user")
        channel = event.get("channel")
        if not user or user in (self.bot_user_id, SLACKBOT):
            return
        if not channel or not event.get("ts"):
            return  # not a message Slack would send; nothing to answer into
        team = body.get("team_id") or event.get("team")
        if not self._allowed(team, channel):
            return
        ts = event["ts"]
        thread = event.get("thread_ts") or (None if direct else ts)
        if direct:
            self._dm_threads[channel] = str(thread or ts)
        conversation = ConversationKey(
            platform="slack", chat_id=channel, thread_id=thread, team_id=team
        )
        text = self._strip_mention(event.get("text") or "").strip()
        files = files_of(event)
        if not text and not files:
            if mentioned:  # a bare mention, or a file Slack withheld with no comment
                await self.client.chat_postMessage(
                    channel=channel,
                    thread_ts=thread,
                    text=HELP_LINE_DIRECT if direct else HELP_LINE,
                )
            return
        if len(text) > self.config.max_message_chars:
            await self.client.chat_postMessage(
                channel=channel,
                thread_ts=thread,
                text=too_long(len(text), self.config.max_message_chars),
            )
            return
        if self.handler is None:
            return
        asked = text
        if direct:
            text = self.assistant.with_context(channel, event.get("thread_ts"), text)
        await self._hand_over(
            InboundMessage(
                event_id=f"slack:{body.get('event_id') or ts}",
                conversation=conversation,
                actor=Actor(platform="slack", user_id=user, team_id=team),
                text=text,
                is_direct=direct,
                message_id=ts,
                mentioned=mentioned,
                attachments=files,
            )
        )
        if direct:  # only once the event is stored, and bounded: Slack waits for the ack
            await self.assistant.title(channel, event.get("thread_ts"), asked)

    def _strip_mention(self, text: str) -> str:
        return text.replace(f"<@{self.bot_user_id}>", "") if self.bot_user_id else text

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        if not _well_typed_action(body):
            return
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
        press = InboundAction(
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
        try:
            await self._hand_over(press)
        except HandoverFailed:
            # Slack never sends a button press again: tell the presser, then answer 503.
            await self._press_not_taken(conversation, user)
            raise

    async def _press_not_taken(self, conversation: ConversationKey, user: str) -> None:
        try:
            async with asyncio.timeout(PRESS_NOTE_TIMEOUT):
                await self.client.chat_postEphemeral(
                    channel=conversation.chat_id,
                    user=user,
                    thread_ts=conversation.thread_id,
                    text=PRESS_NOT_TAKEN,
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("could not tell a presser to press again (%s)", type(exc).__name__)

    async def _groups_of(self, user: str) -> tuple[str, ...]:
        """Which of the approver user groups the user belongs to (cached briefly)."""
        found = []
        now = time.monotonic()
        for group in self.config.approver_groups:
            cached = self._groups.get(group)
            if cached is None or now - cached[0] > GROUP_CACHE_SECONDS:
                try:
                    # before the ack: bounded, and a failure only means "not an approver"
                    async with asyncio.timeout(GROUP_LOOKUP_TIMEOUT):
                        response = await self.client.usergroups_users_list(usergroup=group)
                    members = frozenset(str(u) for u in response.get("users") or [])
                except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
                    log.warning("cannot read user group %s (%s)", group, type(exc).__name__)
                    members = frozenset()
                cached = (now, members)
                self._groups[group] = cached
            if user in cached[1]:
                found.append(group)
        return tuple(found)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        if not _strings(command, "channel_id", "team_id", "user_id", "text", "trigger_id"):
            log.warning("ignored a /parley command with mistyped fields")
            return
        channel = str(command.get("channel_id") or "")
        team = command.get("team_id")
        if not self._allowed(team, channel) or self.handler is None:
            return
        name, _, args = str(command.get("text") or "").strip().partition(" ")
        conversation = ConversationKey(platform="slack", chat_id=channel, team_id=team)
        await self._hand_over(
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
        with _delivery():
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
        with _delivery():
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
        self, conversation: ConversationKey, before: str, after: str | None = None
    ) -> list[ContextMessage]:
        if conversation.thread_id is None:
            return []
        await self.initialize()  # a worker-only process has not asked who the bot is yet
        return await self._threads.history(
            conversation.chat_id, conversation.thread_id, before, self.bot_user_id, after=after
        )

    async def read_channel(self, user_id: str, channel: str, oldest: float) -> list[ContextMessage]:
        await self.initialize()
        return await self._threads.channel(user_id, channel, oldest, self.bot_user_id)

    def live(
        self, conversation: ConversationKey, *, user_id: str, team_id: str | None, is_direct: bool
    ) -> SlackLive | None:
        """A chat stream in a thread; Slack streams only reply to a thread."""
        if conversation.thread_id is None:
            return None
        return SlackLive(
            adapter=self,
            conversation=conversation,
            thread_ts=conversation.thread_id,
            user_id=user_id,
            team_id=team_id or conversation.team_id,
        )

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        thread = conversation.thread_id or self._dm_threads.get(conversation.chat_id)
        if thread is None:
            return
        try:
            await self.client.api_call(
                "assistant.threads.setStatus",
                json={
                    "channel_id": conversation.chat_id,
                    "thread_ts": thread,
                    "status": status or "",
                },
            )
        except SlackApiError as exc:  # not an assistant thread, or the scope is missing
            log.debug("no thread status: %s", exc.response.get("error"))


def _strings(data: object, *names: str) -> bool:
    """Whether each named field is absent, null or a string."""
    if not isinstance(data, dict):
        return False
    return all(isinstance(data.get(name), str | None) for name in names)


def _well_typed(event: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether a message event's fields have the types Slack documents.

    Anything else is not from Slack as documented and would break code further on, so it is
    dropped here with a warning that names the fields (never their content).
    """
    event_fields = ("user", "channel", "ts", "thread_ts", "text", "team", "subtype")
    bad = [name for name in event_fields if not _strings(event, name)]
    bad += [f"body.{name}" for name in ("team_id", "event_id") if not _strings(body, name)]
    if event.get("channel_type") is not None and not isinstance(event["channel_type"], str):
        bad.append("channel_type")
    if bad:
        log.warning("ignored a Slack event with mistyped fields: %s", ", ".join(bad))
    return not bad


def _well_typed_action(body: dict[str, Any]) -> bool:
    actions = body.get("actions")
    ok = (
        isinstance(actions, list)
        and bool(actions)
        and _strings(actions[0], "value", "action_ts")
        and all(_strings(body.get(part) or {}, "id", "team_id") for part in ("user", "channel"))
        and _strings(body.get("team") or {}, "id")
        and _strings(body.get("message") or {}, "ts", "thread_ts")
    )
    if not ok:
        log.warning("ignored a Slack button press with mistyped fields")
    return ok


# Interactive payloads for UI Parley never shows (modals, shortcuts, menus with external
# options, legacy attachments): acknowledged before Bolt, which could not match them all.
NOT_PARLEYS = {
    "view_submission",
    "view_closed",
    "shortcut",
    "message_action",
    "block_suggestion",
    "interactive_message",
    "dialog_submission",
    "dialog_cancellation",
    "dialog_suggestion",
}


def _malformed(body: dict[str, Any]) -> str | None:
    """What makes a payload one Slack never sends (and Bolt would trip over), if anything."""
    kind = body.get("type")
    if kind is not None and not isinstance(kind, str):
        return "a payload whose type is not a string"
    if kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return "an event envelope with no event type"
    if kind == "block_actions":
        actions = body.get("actions")
        if not actions or not isinstance(actions, list) or not isinstance(actions[0], dict):
            return "a button press with no actions"
    return None


def _summary(request: web.Request, body: bytes) -> str:
    """One bounded, escaped line about a refused request; never its content."""
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    kind = request.content_type[:60]
    return f"{len(body)} bytes of {kind!r} from {request.remote!r}, timestamp {timestamp[:24]!r}"


# Slack errors that may pass; any other error code is a refusal that trying again won't change.
_TRANSIENT = {
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
}


@contextlib.contextmanager
def _delivery() -> Iterator[None]:
    """Web API failures as DeliveryFailed (permanent for refusals like channel_not_found)."""
    try:
        yield
    except SlackApiError as exc:
        code = str(exc.response.get("error") or "")
        transient = code in _TRANSIENT or exc.response.status_code >= 500
        raise DeliveryFailed(
            code or f"HTTP {exc.response.status_code}", permanent=not transient
        ) from exc
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise DeliveryFailed(type(exc).__name__, permanent=False) from exc
