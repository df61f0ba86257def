"""Slack on slack-bolt's AsyncApp: events, button presses and /parley in, Block Kit out.

Requests arrive over HTTP (`ingress.py`: signature, what Bolt never sees) or Socket
Mode, when an app token is set. Bolt runs the listener before it answers
(`process_before_response`), and the listener (`inbound.py`) only translates and
queues, so an event is stored before Slack's 200 or Socket Mode ack and still well inside
Slack's 3 s. When the handler cannot store it (`HandoverFailed`, or no answer within
`handover_timeout`) Slack gets a 503 or no ack and sends the event again; the inbox answers a
repeated event id once. The adapter says nothing on its own: a bare mention or an over-long
message is handed over with its `kind`, for the conversation engine to answer. Sends fail
as the adapter error tree (`delivery.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    Addressing,
    Attachment,
    ChannelInfo,
    ContextMessage,
    ConversationKey,
    Inbound,
    InboundAction,
    InboundHandler,
    MessageRef,
    OutboundMessage,
    Platform,
    SessionState,
    hand_over,
)
from adapters.health import ApiHealth
from adapters.platform import ChatAdapter
from adapters.slack.agent import AgentSurface, SessionDirectory
from adapters.slack.assistant import AssistantThreads
from adapters.slack.config import SlackConfig
from adapters.slack.context import ThreadReader, display_name, download, respond
from adapters.slack.delivery import delivery, observed
from adapters.slack.format import messages, streamed_markdown
from adapters.slack.inbound import SlackInbound
from adapters.slack.ingress import SlackIngress
from adapters.slack.limits import HistoryLimits
from adapters.slack.membership import member_of
from adapters.slack.oauth import InstallEvents, Route, bolt_app, oauth_routes, oauth_settings
from adapters.slack.orgs import Organisations
from adapters.slack.plan_prompt import post_plan
from adapters.slack.stream import SlackLive
from adapters.slack.workspaces import Installations, RoutingClient, Workspaces

log = logging.getLogger(__name__)


# `/parley memories`; a mention is answered in its thread, which then goes on
ADDRESSING = Addressing(
    command_prefix="/parley ", code=True, mention="@Parley", threads=True, ephemeral=True
)


@dataclass(kw_only=True)
class SlackAdapter(ChatAdapter):
    config: SlackConfig
    handler: InboundHandler | None = None
    sessions: SessionDirectory | None = None  # where agent sessions live, for every process
    # with config.installs: where each workspace's installation (its token) is kept
    installations: Installations | None = None
    oauth_states: AsyncOAuthStateStore | None = None
    workspaces: Workspaces | None = field(default=None, init=False)
    platform: Platform = "slack"
    addressing: Addressing = ADDRESSING
    client: AsyncWebClient = field(init=False)
    app: AsyncApp = field(init=False)
    bot_user_id: str | None = field(default=None, init=False)
    api: ApiHealth = field(init=False)
    ingress: SlackIngress = field(init=False)
    _socket: Any = field(default=None, init=False)
    _threads: ThreadReader = field(init=False)
    _orgs: Organisations = field(init=False)  # a channel's organisation, for the allowlist
    _reads: AsyncWebClient = field(init=False)
    assistant: AssistantThreads = field(init=False)
    agent: AgentSurface | None = field(default=None, init=False)
    inbound: SlackInbound = field(init=False)
    member_of = member_of  # conversations.members and the allowlists (membership.py)

    def __post_init__(self) -> None:
        self.org_team = self.config.team_memories == "organisation"
        bolt_client = self.client = AsyncWebClient(
            token=self.config.bot_token or None,
            base_url=self.config.api_url,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)],
        )
        # history reads see Slack's 429 themselves (limits.py): no SDK retry that sleeps
        reads = self._reads = AsyncWebClient(
            token=self.config.bot_token, base_url=self.config.api_url
        )
        oauth = None
        if self.config.installs:
            assert self.installations is not None, "OAuth installs need an installation store"
            self.workspaces = Workspaces(store=self.installations, api_url=self.config.api_url)
            # every part sends with the workspace the current task works for (workspaces.py)
            self.client = cast(AsyncWebClient, RoutingClient(self.workspaces))
            reads = cast(AsyncWebClient, RoutingClient(self.workspaces, reads=True))
            oauth = oauth_settings(self.config, self.installations, self.oauth_states)
        limits = HistoryLimits(wait=self.config.history_wait)
        self._threads = ThreadReader(client=self.client, reads=reads, limits=limits)
        self._orgs = Organisations(client=self.client)
        self.api = ApiHealth(platform="Slack", degraded_after=self.config.degraded_after)
        self.app = bolt_app(bolt_client, self.config.signing_secret, oauth)
        if self.workspaces is not None:
            InstallEvents(workspaces=self.workspaces).register(self.app)
        self.ingress = SlackIngress(app=self.app, signing_secret=self.config.signing_secret)
        self.assistant = AssistantThreads(
            client=self.client,
            greeting=self.config.greeting,
            prompts=self.config.suggested_prompts,
        )
        if self.config.surface == "agent":
            self.agent = AgentSurface(
                config=self.config,
                client=self.client,
                accepting=self._accepting,
                hand_over=self.hand_over,
                directory=self.sessions,
            )
            self.agent.register(self.app)
        else:
            self.app.assistant(self.assistant.middleware())
        self.inbound = SlackInbound(
            config=self.config,
            client=self.client,
            bot_user_id=self._me,
            accepting=self._accepting,
            hand_over=self.hand_over,
            direct=self.agent or self.assistant,
        )
        self.inbound.register(self.app)

    # --- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        if self.workspaces is not None:
            if self.workspaces.session is None:
                self.workspaces.opened(aiohttp.ClientSession())
                self._reads.session = self.workspaces.session
            return  # each workspace's identity comes with its installation
        if self.client.session is None:
            # one session for every Web API call: without it slack_sdk opens a connection per
            # call, which a streamed answer (start, appends, stop) pays several times over
            self.client.session = aiohttp.ClientSession()
            self._reads.session = self.client.session
        if self.bot_user_id is None:
            with observed(self.api):
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
        if self.workspaces is not None:
            return await self.workspaces.close()
        session, self.client.session = self.client.session, None
        self._reads.session = None
        if session is not None:
            await session.close()

    async def health(self) -> tuple[bool, str]:
        """Whether Slack is usable from here, and what was seen of it."""
        if not self.bot_user_id and self.workspaces is None:
            return False, "not signed in yet (auth.test has not succeeded)"
        ok, trouble = self.workspaces.status(self.api) if self.workspaces else self.api.status()
        if self.config.app_token:
            connected = self._socket is not None and await self._socket.client.is_connected()
            if not connected:
                return False, ", ".join(filter(None, ["Socket Mode is not connected", trouble]))
            return ok, trouble or "Socket Mode connected"
        if not self.ingress.route_registered:
            return False, "no route for Slack's events"
        return ok, trouble or "events on /slack/events"

    def slack_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return self.ingress.route()

    async def dispatch(self, request: AsyncBoltRequest) -> BoltResponse:
        return await self.ingress.dispatch(request)

    def _accepting(self) -> bool:
        return self.handler is not None

    def _me(self) -> str | None:
        """Parley's own user id in the current workspace."""
        return self.workspaces.bot_user_id() if self.workspaces is not None else self.bot_user_id

    async def acting_in(self, conversation: ConversationKey) -> None:
        if self.workspaces is not None:
            await self.workspaces.enter(conversation.team_id)

    def oauth_routes(self) -> list[Route]:
        """Add to Slack and Slack's redirect back, when installs go through OAuth."""
        return oauth_routes(self.app)

    async def hand_over(self, event: Inbound) -> None:
        assert self.handler is not None
        await hand_over(self.handler, event, self.config.handover_timeout)
        self.ingress.stored()

    # --- neutral events out -----------------------------------------------------------------

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        await self.acting_in(conversation)
        ts = ""
        with delivery(self.api):
            parts = messages(message)
            if self._draws_plan(conversation, message, parts):
                assert message.plan is not None
                fallback, blocks = parts[0]
                drawn = await post_plan(self.client, conversation, message.plan, fallback, blocks)
                if drawn is not None:
                    return MessageRef(conversation=conversation, message_id=drawn)
            for fallback, blocks in parts:
                url = message.reply_url if message.private_to else None
                if url and await respond(url, self.config.api_url, fallback, blocks):
                    continue  # answered through the command's response_url
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
                        # a link in model text must not preview private content
                        unfurl_links=False,
                        unfurl_media=False,
                    )
                    ts = str(response.get("ts") or "")
        return MessageRef(conversation=conversation, message_id=ts)

    def _draws_plan(
        self, conversation: ConversationKey, message: OutboundMessage, parts: list[Any]
    ) -> bool:
        """An approval prompt with a plan is a plan stream: on the agent surface, in a thread
        (Slack streams only replies), seen by all (a stream is never ephemeral), one message."""
        return (
            message.plan is not None
            and self.agent is not None
            and conversation.thread_id is not None
            and not message.private_to
            and len(parts) == 1
        )

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        fallback, blocks = messages(message)[0]
        await self.acting_in(ref.conversation)
        url = message.reply_url if message.private_to else None
        # chat.update cannot find an ephemeral: the press's response_url can replace it
        if url and await respond(url, self.config.api_url, fallback, blocks, replace_original=True):
            return
        with delivery(self.api):
            await self.client.chat_update(
                channel=ref.conversation.chat_id, ts=ref.message_id, text=fallback, blocks=blocks
            )

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        if not alert:
            return  # the edited message already shows the decision
        await self.acting_in(action.conversation)
        await self.client.chat_postEphemeral(
            channel=action.conversation.chat_id,
            user=action.actor.user_id,
            thread_ts=action.conversation.thread_id,
            text=text,
        )

    async def download(self, attachment: Attachment, limit: int) -> bytes:
        token = (self.client.token or "") if self.workspaces else self.config.bot_token
        return await download(token, self.config.api_url, attachment, limit)

    async def thread_history(
        self, conversation: ConversationKey, before: str, after: str | None = None
    ) -> list[ContextMessage]:
        if conversation.thread_id is None:
            return []
        await self.initialize()  # a worker-only process has not asked who the bot is yet
        await self.acting_in(conversation)
        return await self._threads.history(
            conversation.chat_id, conversation.thread_id, before, self._me(), after=after
        )

    async def channel_info(self, channel: str) -> ChannelInfo:
        await self.initialize()
        info = await self._threads.channel_info(channel, self._me())
        return replace(info, allowed=await self._orgs.allowed(self.config, info))

    async def channel_history(self, channel_id: str, oldest: float) -> list[ContextMessage]:
        await self.initialize()
        return await self._threads.channel_history(channel_id, oldest, self._me())

    async def user_timezone(self, user_id: str) -> str | None:
        """The person's IANA zone from `users.info` (`tz`; the record thread reading caches
        too, an hour); None when Slack does not say or does not answer within two seconds."""
        return str((await self._threads.about(user_id)).get("tz") or "") or None

    async def user_name(self, user_id: str) -> str:
        """The display name from the same record (events carry only the id)."""
        return display_name(await self._threads.about(user_id))

    async def user_left(self, user_id: str) -> bool:
        return await self._threads.left(user_id)  # deactivated or unknown, not merely away

    def live(
        self,
        conversation: ConversationKey,
        *,
        user_id: str,
        team_id: str | None,
        is_direct: bool,
        allowed_mentions: frozenset[str] = frozenset(),
        reply_to: str | None = None,  # Slack answers in the thread instead
    ) -> SlackLive | None:
        """A chat stream in a thread; Slack streams only reply to a thread."""
        if conversation.thread_id is None:
            return None
        return SlackLive(
            client=self.client,
            send=self.send,
            edit=self.edit,
            conversation=conversation,
            thread_ts=conversation.thread_id,
            user_id=user_id,
            team_id=team_id or conversation.team_id,
            allowed_mentions=allowed_mentions,
            tasks=self.agent is not None,  # task and plan updates: the agent surface's
        )

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        thread = conversation.thread_id or self.inbound.dm_threads.get(conversation.chat_id)
        if thread is None:
            return
        await self.acting_in(conversation)
        try:
            await self.client.api_call(
                "assistant.threads.setStatus",
                json={
                    "channel_id": conversation.chat_id,
                    "thread_ts": thread,
                    # the model's words: previews follow the posts' mention rule
                    "status": streamed_markdown(status or "", frozenset(), final=True),
                },
            )
        except SlackApiError as exc:  # not an assistant thread, or the scope is missing
            log.debug("no thread status: %s", exc.response.get("error"))

    @property
    def greeting(self) -> str:
        return self.config.greeting

    async def session_status(
        self,
        conversation: ConversationKey,
        message_id: str | None,
        state: SessionState,
        title: str | None = None,
        initiator: str | None = None,
    ) -> None:
        """The run's agent session follows it (agent surface only); `initiator`: who asked."""
        if self.agent is not None:
            await self.acting_in(conversation)
            await self.agent.session_status(conversation, message_id, state, title, initiator)
