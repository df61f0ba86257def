"""A local server that plays Slack's Web API (and Socket Mode's WebSocket) for slack-sdk.

    fake = FakeSlack()
    await fake.start()                       # SLACK_API_URL = fake.api_url
    fake.fail_next("chat.postMessage", retry_after=1)   # a 429 with Retry-After
    fake.answer_error("chat.postMessage", "channel_not_found")   # an API error answer
    fake.groups["SADMINS"] = ["UBOSS"]       # usergroups.users.list

It answers auth.test, chat.postMessage, chat.update, chat.postEphemeral, chat.delete,
the chat streaming methods (chat.startStream / appendStream / stopStream, with Slack's
refusals: a channel stream without `recipient_team_id` or `recipient_user_id`,
`user_not_found` for the users in `fake.external_users` (Slack Connect), a stream that is not
streaming any more; `fake.refuse_stream("chat.appendStream", "ratelimited")` scripts one),
task_update and plan_update chunks (`post.tasks`, `post.plan`, `post.display`; chat.stopStream's
`blocks` go below them and its `session_status` joins the session's statuses, "active"
when absent, as Slack documents; a chat.update
with blocks replaces the message, its plan and tasks too),
assistant.threads.setStatus / setSuggestedPrompts / setTitle (suggested prompts without a
thread: pinned to the Messages tab, as under `agent_view`), the agent session methods
agents.sessions.setStatus (one of Slack's four statuses; `fake.sessions[(channel, thread)]`
keeps each session's status history, title and initiator) and agents.sessions.rename,
usergroups.users.list and apps.connections.open (whose URL is
this server's `/socket` WebSocket: `await fake.socket_send(envelope)` pushes a Socket Mode
envelope to the connected app and `fake.socket_acks` collects its acks), and for context
and files: conversations.replies (`fake.thread(channel, thread_ts, ...)` plus what the bot
posted in that thread; paged with `fake.page_size`; `oldest` honoured), conversations.members
(`fake.members[channel]`), conversations.list (`fake.channel_names[id] = name`),
conversations.history (`fake.history[channel]`, filtered by `oldest`), conversations.info
(host team from `fake.channel_teams[channel]`, default T1; its `enterprise_id` from
`fake.channel_orgs`), team.info (a workspace's organisation from `fake.team_orgs`),
users.info (`fake.users[id] = "Display Name"`, `fake.zones[id]` its `tz`) and file
downloads at `url_private` (`fake.add_file(data, name, mimetype)` returns the file object an
event carries; a request without `Authorization: Bearer <fake.bot_token>` gets Slack's
sign-in web page, as the real one does). `fake.posts`
holds what the bot posted, edits applied (each post's `token`: the bot token it was posted
with). Helpers build signed Events API requests.

Installs (OAuth v2): `fake.install(code, team=…, enterprise=…, token=…)` makes oauth.v2.access
answer that code with a bot token for that workspace (or, with `team=None`, an org-wide
install), and auth.test answer for that token as Slack would; `fake.revoke(token)` makes every
call with it answer `token_revoked`.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import WSMsgType, web

from tests.fakes.server import FakeServer, Recorded

_token: contextvars.ContextVar[str] = contextvars.ContextVar("token", default="")
_auth: contextvars.ContextVar[str] = contextvars.ContextVar("auth", default="")
BOT_USER = "UBOT"
TEAM = "T1"
AGENT_STATUSES = ("processing", "active", "suspended", "closed")


@dataclass
class AgentSession:
    statuses: list[str] = field(default_factory=list)
    title: str = ""
    initiator: str | None = None  # initiator_user_id, given when the session is created


@dataclass
class Interaction:
    """A press's response_url: the message it was made on, who pressed, how often used."""

    post: Post
    user: str
    uses: int = 0


@dataclass
class Post:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    ephemeral_to: str | None = None
    edits: int = 0
    streaming: bool = False  # a chat stream that has not been stopped
    appends: list[str] = field(default_factory=list)  # text as each stream call left it
    tasks: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # task_update: id → title, status
    plan: str | None = None  # the newest plan_update chunk's title
    display: str | None = None  # chat.startStream's task_display_mode (timeline, plan)
    token: str = ""  # the bot token it was posted with

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b["elements"]]

    @property
    def body(self) -> str:
        return "\n\n".join(b["text"]["text"] for b in self.blocks if b.get("type") == "section")


class FakeSlack(FakeServer):
    def __init__(self, bot_token: str = "xoxb-test-token") -> None:
        super().__init__(name="slack")
        self.bot_token = bot_token
        self.threads: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.members: dict[str, list[str]] = {}
        self.channel_names: dict[str, str] = {}  # id -> name, for conversations.list
        self.channel_teams: dict[str, list[str]] = {}  # id -> host team, then shared ones
        self.channel_orgs: dict[str, str] = {}  # id -> the `enterprise_id` its info names
        self.team_orgs: dict[str, str] = {}  # workspace -> its organisation (team.info)
        self.history: dict[str, list[dict[str, Any]]] = {}  # channel -> top-level messages
        self.users: dict[str, str] = {}
        self.zones: dict[str, str] = {}  # user id -> IANA zone, users.info's `tz`
        self.deactivated: set[str] = set()  # users.info says `deleted: true`
        self.files: dict[str, tuple[bytes, str]] = {}  # path -> (bytes, mimetype)
        self.page_size = 200
        self._file_ids = itertools.count(1)
        self.posts: list[Post] = []
        self.failures: dict[str, list[int]] = {}
        self.errors: dict[str, list[tuple[str, int]]] = {}
        self.groups: dict[str, list[str]] = {}
        self.sessions: dict[tuple[str, str], AgentSession] = {}  # agents.sessions.*
        self.socket_acks: list[dict[str, Any]] = []
        self.external_users: set[str] = set()
        self.deleted: list[Post] = []
        self.refusals: dict[str, list[str]] = {}
        self.codes: dict[str, dict[str, Any]] = {}  # OAuth code -> oauth.v2.access answer
        self.identities: dict[str, dict[str, Any]] = {}  # bot token -> auth.test answer
        self.revoked: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._connected = asyncio.Event()
        self.add("POST", "/api/*", self._method)
        self.add("GET", "/api/*", self._method)
        self.add("GET", "/files-pri/*", self._file)
        # A slash command's or a press's response_url: what was posted there, and its status.
        self.responses: list[dict[str, Any]] = []
        self.response_status = 200
        self.interactions: dict[str, Interaction] = {}  # a press's response_url → its message
        self.add("POST", "/response/*", self._response)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def thread(
        self, channel: str, root_ts: str, *messages: tuple[str, str]
    ) -> list[dict[str, Any]]:
        """A thread of (user, text) messages: the first is the root (at `root_ts`), the rest
        follow a microsecond apart. Returns the messages, with their ts."""
        seconds, _, micros = root_ts.partition(".")
        made = []
        for index, (user, text) in enumerate(messages):
            ts = f"{seconds}.{int(micros) + index:06d}"
            message = {"type": "message", "user": user, "text": text, "ts": ts}
            message["thread_ts"] = root_ts
            made.append(message)
        self.threads.setdefault((channel, root_ts), []).extend(made)
        return made

    def add_file(self, data: bytes, name: str, mimetype: str) -> dict[str, Any]:
        file_id = f"F{next(self._file_ids):08d}"
        path = f"/files-pri/{TEAM}-{file_id}/{name}"
        self.files[path] = (data, mimetype)
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rpartition(".")[2],
            "size": len(data),
            "mode": "hosted",
            "url_private": f"{self.url}{path}",
            "url_private_download": f"{self.url}{path.replace(file_id + '/', file_id + '/download/')}",
        }

    async def _file(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            page = "<!DOCTYPE html><html><body>Sign in to Slack</body></html>"
            return web.Response(text=page, content_type="text/html")
        path = request.path.replace("/download/", "/", 1)
        if path not in self.files:
            return web.Response(status=404, text="file not found")
        data, mimetype = self.files[path]
        return web.Response(body=data, content_type=mimetype)

    def install(
        self, code: str, *, team: str | None, enterprise: str | None = None, token: str
    ) -> None:
        """oauth.v2.access answers `code` with a bot token for `team` (None: org-wide)."""
        bot_user = f"UBOT{token[-4:].upper()}"
        self.codes[code] = {
            "ok": True,
            "app_id": "A1",
            "authed_user": {"id": "UADMIN"},
            "scope": "app_mentions:read,chat:write",
            "token_type": "bot",
            "access_token": token,
            "bot_user_id": bot_user,
            "team": {"id": team, "name": f"Team {team}"} if team else None,
            "enterprise": {"id": enterprise, "name": f"Org {enterprise}"} if enterprise else None,
            "is_enterprise_install": team is None,
        }
        self.identities[token] = {
            "ok": True,
            "user_id": bot_user,
            "bot_id": f"B{token[-4:].upper()}",
            "team_id": team,
            "enterprise_id": enterprise,
            "is_enterprise_install": team is None,
            "user": "parley",
            "url": "https://acme.slack.com/",
        }

    def revoke(self, token: str) -> None:
        self.revoked.add(token)

    async def _m_oauth_v2_access(self, params: dict[str, Any]) -> dict[str, Any]:
        # the app's credentials: HTTP Basic (as slack_sdk sends them) or in the form
        basic = _auth.get().startswith("Basic ")
        if not basic and not (params.get("client_id") and params.get("client_secret")):
            return {"ok": False, "error": "invalid_client_id"}
        answer = self.codes.pop(str(params.get("code")), None)  # a code is good once
        return answer or {"ok": False, "error": "invalid_code"}

    def fail_next(self, method: str, *, retry_after: int) -> None:
        self.failures.setdefault(method, []).append(retry_after)

    def refuse_stream(self, method: str, error: str) -> None:
        """The next call of a chat streaming method answers `ok: false` with `error`."""
        self.refusals.setdefault(method, []).append(error)

    def answer_error(self, method: str, error: str, *, status: int = 200, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with `{"ok": false, "error": error}`."""
        self.errors.setdefault(method, []).extend([(error, status)] * times)

    def response_url(self, name: str = "cmd") -> str:
        return f"{self.url}/response/{name}"

    def action(self, post: Post, label: str, *, user: str, team: str = TEAM) -> bytes:
        """A press on `post`'s button `label` by `user`, with a live response_url that
        answers as Slack's does for that message (`_response`)."""
        name = f"act{next(_event_ids)}"
        self.interactions[name] = Interaction(post=post, user=user)
        return block_action(post, label, user=user, team=team, response_url=self.response_url(name))

    async def _response(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        if self.response_status != 200:
            return web.Response(status=self.response_status, text="expired_url")
        self.responses.append(recorded.body)
        interaction = self.interactions.get(request.path.rsplit("/", 1)[-1])
        if interaction is None:
            return web.Response(text="ok")
        # Slack's contract: a response_url takes up to five messages within 30 minutes;
        # `replace_original` replaces the message pressed on (an ephemeral one too, for its
        # person), `delete_original` removes it; otherwise a new message, ephemeral to the
        # presser unless `response_type` is "in_channel".
        interaction.uses += 1
        if interaction.uses > 5:
            return web.Response(status=404, text="used_url")
        body = recorded.body if isinstance(recorded.body, dict) else {}
        post = interaction.post
        if body.get("delete_original") in (True, "true"):
            if post in self.posts:
                self.posts.remove(post)
                self.deleted.append(post)
        elif body.get("replace_original") in (True, "true"):
            post.text = str(body.get("text", ""))
            post.blocks = list(body.get("blocks") or [])
            post.edits += 1
        else:
            in_channel = body.get("response_type") == "in_channel"
            self.posts.append(
                Post(
                    channel=post.channel,
                    ts=self._new_ts(),
                    text=str(body.get("text", "")),
                    blocks=list(body.get("blocks") or []),
                    thread_ts=body.get("thread_ts") or post.thread_ts,
                    ephemeral_to=None if in_channel else interaction.user,
                )
            )
        return web.Response(text="ok")

    def method_calls(self, method: str) -> list[Recorded]:
        return self.calls(f"/api/{method}")

    def in_channel(self, channel: str, thread_ts: str | None = None) -> list[Post]:
        return [
            p
            for p in self.posts
            if p.channel == channel and (thread_ts is None or p.thread_ts == thread_ts)
        ]

    async def start(self, port: int = 0) -> FakeSlack:
        await super().start(port)
        assert self._runner is not None
        return self

    async def _method(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        method = request.path.removeprefix("/api/")
        if method == "socket" or request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._socket(request)
        params = recorded.body if isinstance(recorded.body, dict) else dict(recorded.query)
        for key in ("blocks",):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        recorded.body = params
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else ""
        _token.set(token)
        _auth.set(auth)
        if token in self.revoked:
            return web.json_response({"ok": False, "error": "token_revoked"})
        pending = self.failures.get(method)
        if pending:
            retry_after = pending.pop(0)
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(retry_after)},
            )
        if errors := self.errors.get(method):
            error, status = errors.pop(0)
            return web.json_response({"ok": False, "error": error}, status=status)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response(await handler(params))

    async def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.identities:  # tokens from installs: each answers for its own workspace
            known = self.identities.get(_token.get())
            return known or {"ok": False, "error": "invalid_auth"}
        return {
            "ok": True,
            "user_id": BOT_USER,
            "bot_id": "BBOT",
            "team_id": TEAM,
            "user": "parley",
            "team": "Acme",
            "url": "https://acme.slack.com/",
        }

    def _new_ts(self) -> str:
        return message_ts()  # one clock with the events: a later post sorts later, as on Slack

    async def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        post = Post(
            channel=str(params["channel"]),
            ts=self._new_ts(),
            text=str(params.get("text", "")),
            blocks=list(params.get("blocks") or []),
            thread_ts=params.get("thread_ts"),
            token=_token.get(),
        )
        self.posts.append(post)
        return {
            "ok": True,
            "channel": post.channel,
            "ts": post.ts,
            "message": {"text": post.text, "ts": post.ts},
        }

    async def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        post = Post(
            channel=str(params["channel"]),
            ts=self._new_ts(),
            text=str(params.get("text", "")),
            blocks=list(params.get("blocks") or []),
            thread_ts=params.get("thread_ts"),
            ephemeral_to=str(params["user"]),
        )
        self.posts.append(post)
        return {"ok": True, "message_ts": post.ts}

    async def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        for post in self.posts:
            # an ephemeral message is not the channel's: chat.update cannot find it
            if (
                post.channel == params["channel"]
                and post.ts == params["ts"]
                and not post.ephemeral_to
            ):
                post.text = str(params.get("text", ""))
                if params.get("blocks"):  # new blocks replace all of it, a streamed plan too
                    post.tasks, post.plan = {}, None
                post.blocks = list(params.get("blocks") or [])
                post.edits += 1
                return {"ok": True, "channel": post.channel, "ts": post.ts}
        return {"ok": False, "error": "message_not_found"}

    async def _m_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        for post in self.posts:
            if post.channel == params.get("channel") and post.ts == params.get("ts"):
                self.posts.remove(post)
                self.deleted.append(post)
                return {"ok": True, "channel": post.channel, "ts": post.ts}
        return {"ok": False, "error": "message_not_found"}

    def _refused(self, method: str) -> dict[str, Any] | None:
        pending = self.refusals.get(method)
        return {"ok": False, "error": pending.pop(0)} if pending else None

    @staticmethod
    def _chunk_text(params: dict[str, Any]) -> str:
        text = str(params.get("markdown_text") or "")
        for chunk in params.get("chunks") or []:
            if chunk.get("type") == "markdown_text":
                text += str(chunk.get("text") or "")
        return text

    @staticmethod
    def _chunk_tasks(post: Post, params: dict[str, Any]) -> dict[str, Any] | None:
        """Apply task_update chunks (Slack: pending, in_progress, complete, error) and
        plan_update chunks (a title)."""
        for chunk in params.get("chunks") or []:
            if chunk.get("type") == "plan_update":
                if not chunk.get("title"):
                    return {"ok": False, "error": "invalid_chunks"}
                post.plan = str(chunk["title"])
            if chunk.get("type") != "task_update":
                continue
            if chunk.get("status") not in ("pending", "in_progress", "complete", "error"):
                return {"ok": False, "error": "invalid_chunks"}
            post.tasks[str(chunk.get("id"))] = (str(chunk.get("title")), str(chunk["status"]))
        return None

    async def _m_chat_startStream(self, params: dict[str, Any]) -> dict[str, Any]:
        if refused := self._refused("chat.startStream"):
            return refused
        channel = str(params.get("channel") or "")
        if not params.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        if not channel.startswith("D"):  # channels need to know who receives the stream
            if not params.get("recipient_team_id"):
                return {"ok": False, "error": "missing_recipient_team_id"}
            if not params.get("recipient_user_id"):
                return {"ok": False, "error": "missing_recipient_user_id"}
        if params.get("recipient_user_id") in self.external_users:
            return {"ok": False, "error": "user_not_found"}
        if params.get("task_display_mode") not in (None, "timeline", "plan"):
            return {"ok": False, "error": "invalid_arguments"}
        text = self._chunk_text(params)
        post = Post(
            channel=channel,
            ts=self._new_ts(),
            text=text,
            blocks=[],
            thread_ts=str(params["thread_ts"]),
            streaming=True,
            appends=[text],
            display=params.get("task_display_mode"),
        )
        if refused := self._chunk_tasks(post, params):
            return refused
        self.posts.append(post)
        return {"ok": True, "channel": channel, "ts": post.ts}

    def _streamed(self, params: dict[str, Any]) -> Post | dict[str, Any]:
        for post in self.posts:
            if post.channel == params.get("channel") and post.ts == params.get("ts"):
                if not post.streaming:
                    return {"ok": False, "error": "message_not_in_streaming_state"}
                return post
        return {"ok": False, "error": "message_not_found"}

    async def _m_chat_appendStream(self, params: dict[str, Any]) -> dict[str, Any]:
        if refused := self._refused("chat.appendStream"):
            return refused
        post = self._streamed(params)
        if isinstance(post, dict):
            return post
        if refused := self._chunk_tasks(post, params):
            return refused
        post.text += self._chunk_text(params)
        post.appends.append(post.text)
        return {"ok": True, "channel": post.channel, "ts": post.ts}

    async def _m_chat_stopStream(self, params: dict[str, Any]) -> dict[str, Any]:
        if refused := self._refused("chat.stopStream"):
            return refused
        post = self._streamed(params)
        if isinstance(post, dict):
            return post
        if refused := self._chunk_tasks(post, params):
            return refused
        status = params.get("session_status")
        if status is not None and status not in AGENT_STATUSES:
            return {"ok": False, "error": "invalid_arguments"}
        post.text += self._chunk_text(params)
        post.blocks = list(params.get("blocks") or [])  # below the streamed content
        post.streaming = False
        if post.thread_ts is not None:
            key = (post.channel, post.thread_ts)
            if status is not None:
                self.sessions.setdefault(key, AgentSession()).statuses.append(str(status))
            elif key in self.sessions:  # Slack's documented default for a session's stream
                self.sessions[key].statuses.append("active")
        return {
            "ok": True,
            "channel": post.channel,
            "ts": post.ts,
            "message": {"text": post.text, "ts": post.ts},
        }

    async def _m_assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    async def _m_assistant_threads_setSuggestedPrompts(
        self, params: dict[str, Any]
    ) -> dict[str, Any]:
        prompts = params.get("prompts")
        if not prompts or not params.get("channel_id"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}

    async def _m_agents_sessions_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, thread = params.get("channel_id"), params.get("thread_ts")
        status = params.get("status")
        if not channel or not thread or status not in AGENT_STATUSES:
            return {"ok": False, "error": "invalid_arguments"}
        session = self.sessions.setdefault((str(channel), str(thread)), AgentSession())
        session.statuses.append(str(status))
        if params.get("title") and not session.title:
            session.title = str(params["title"])  # a title is given on creation
        if params.get("initiator_user_id") and session.initiator is None:
            session.initiator = str(params["initiator_user_id"])
        return {"ok": True, "status": status, "title": session.title}

    async def _m_agents_sessions_rename(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (str(params.get("channel_id")), str(params.get("thread_ts")))
        if key not in self.sessions or not params.get("title"):
            return {"ok": False, "error": "session_not_found"}
        self.sessions[key].title = str(params["title"])
        return {"ok": True}

    async def _m_assistant_threads_setTitle(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("title") or not params.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}

    async def _m_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if (channel, ts) not in self.threads and not self.in_channel(channel, ts):
            return {"ok": False, "error": "thread_not_found"}
        bot_posts = [
            {"type": "message", "user": BOT_USER, "bot_id": "BBOT", "text": p.text, "ts": p.ts,
             "thread_ts": ts}
            for p in self.in_channel(channel, ts)
            if p.ephemeral_to is None
        ]  # fmt: skip
        messages = sorted(
            [*self.threads.get((channel, ts), []), *bot_posts], key=lambda m: float(m["ts"])
        )
        if params.get("oldest"):  # like Slack, the thread's first message is always listed
            oldest, inclusive = float(params["oldest"]), params.get("inclusive") in ("1", "true")
            messages = [
                m
                for m in messages
                if m["ts"] == ts
                or float(m["ts"]) > oldest
                or inclusive
                and float(m["ts"]) == oldest
            ]
        start = int(params.get("cursor") or 0)
        page = messages[start : start + self.page_size]
        more = start + self.page_size < len(messages)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + self.page_size) if more else ""},
        }

    async def _m_conversations_list(self, params: dict[str, Any]) -> dict[str, Any]:
        channels = [{"id": i, "name": n, "is_channel": True} for i, n in self.channel_names.items()]
        return {"ok": True, "channels": channels, "response_metadata": {"next_cursor": ""}}

    async def _m_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if channel not in self.history:
            return {"ok": False, "error": "channel_not_found"}
        if BOT_USER not in self.members.get(channel, []):
            return {"ok": False, "error": "not_in_channel"}
        oldest = float(params.get("oldest") or 0)
        found = [m for m in self.history[channel] if float(m["ts"]) > oldest]
        found.sort(key=lambda m: float(m["ts"]), reverse=True)  # Slack answers newest first
        return {"ok": True, "messages": found, "has_more": False, "response_metadata": {}}

    async def _m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if channel not in self.members:
            return {"ok": False, "error": "channel_not_found"}
        teams = self.channel_teams.get(channel, [TEAM])
        info = {"id": channel, "name": self.channel_names.get(channel, channel.lower())}
        info |= {"context_team_id": teams[0], "is_shared": len(teams) > 1}
        if channel in self.channel_orgs:
            info["enterprise_id"] = self.channel_orgs[channel]
        return {
            "ok": True,
            "channel": info | ({"shared_team_ids": teams} if len(teams) > 1 else {}),
        }

    async def _m_team_info(self, params: dict[str, Any]) -> dict[str, Any]:
        """Slack's documented answer: the workspace, and its organisation's id and name when
        it is part of one (Enterprise Grid)."""
        team = str(params.get("team") or TEAM)
        if team != TEAM and team not in self.team_orgs:
            return {"ok": False, "error": "team_not_found"}
        found = {"id": team, "name": f"Team {team}", "domain": team.lower()}
        if org := self.team_orgs.get(team):
            found |= {"enterprise_id": org, "enterprise_name": f"Org {org}"}
        return {"ok": True, "team": found}

    async def _m_conversations_members(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if channel not in self.members:
            return {"ok": False, "error": "channel_not_found"}
        start = int(params.get("cursor") or 0)
        members = self.members[channel]
        page, more = members[start : start + self.page_size], start + self.page_size < len(members)
        cursor = str(start + self.page_size) if more else ""
        return {"ok": True, "members": page, "response_metadata": {"next_cursor": cursor}}

    async def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("user") or "")
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        name = self.users[user]
        return {
            "ok": True,
            "user": {
                "id": user,
                "name": name.lower().replace(" ", "."),
                "profile": {"display_name": name, "real_name": name},
                **({"tz": self.zones[user]} if user in self.zones else {}),
                "deleted": user in self.deactivated,
            },
        }

    async def _m_usergroups_users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "users": self.groups.get(str(params.get("usergroup")), [])}

    async def _m_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/api/socket"}

    # --- Socket Mode ------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {}})
        self._connected.set()
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                self.socket_acks.append(json.loads(msg.data))
            elif msg.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                break
        return ws

    async def socket_send(self, envelope: dict[str, Any]) -> None:
        await asyncio.wait_for(self._connected.wait(), 10)
        await self._sockets[-1].send_json(envelope)

    async def stop(self) -> None:
        for ws in self._sockets:
            await ws.close()
        await super().stop()


# --- requests Slack would send to the app ------------------------------------------------


def signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed(
    secret: str, body: bytes, *, age: float = 0.0, content_type: str = "application/json"
) -> dict[str, str]:
    timestamp = str(int(time.time() - age))
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature(secret, timestamp, body),
    }


_event_ids = itertools.count(1)
_ts = itertools.count(1)


def event_callback(
    event: dict[str, Any], *, event_id: str | None = None, team: str = TEAM, shared: bool = False
) -> dict[str, Any]:
    """`shared`: the event comes from a Slack Connect channel (`is_ext_shared_channel`)."""
    return ({"is_ext_shared_channel": True} if shared else {}) | {
        "token": "legacy",
        "team_id": team,
        "api_app_id": "A1",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):06d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": BOT_USER, "is_bot": True}],
    }


def message_ts() -> str:
    return f"{int(time.time())}.{next(_ts):06d}"


def dm_event(user: str, text: str, channel: str = "DANA", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel_type": "im",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": message_ts(),
        **extra,
    }


def mention_event(user: str, text: str, channel: str = "CGEN", **extra: Any) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": message_ts(),
        **extra,
    }


def channel_message(user: str, text: str, channel: str = "CGEN", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel_type": "channel",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": message_ts(),
        **extra,
    }


def assistant_thread_started(
    user: str, channel: str = "DANA", viewing: str | None = "CGEN", team: str = TEAM
) -> dict[str, Any]:
    return {
        "type": "assistant_thread_started",
        "assistant_thread": {
            "user_id": user,
            "context": {"channel_id": viewing, "team_id": team, "enterprise_id": None},
            "channel_id": channel,
            "thread_ts": message_ts(),
        },
        "event_ts": message_ts(),
    }


def assistant_context_changed(started: dict[str, Any], viewing: str) -> dict[str, Any]:
    thread = dict(started["assistant_thread"])
    thread["context"] = {**thread["context"], "channel_id": viewing}
    return {
        "type": "assistant_thread_context_changed",
        "assistant_thread": thread,
        "event_ts": message_ts(),
    }


def block_action(
    post: Post,
    label: str,
    *,
    user: str,
    team: str = TEAM,
    response_url: str = "https://hooks.invalid/response",
) -> bytes:
    button = next(b for b in post.buttons if b["text"]["text"] == label)
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "team_id": team},
        "team": {"id": team},
        "api_app_id": "A1",
        "channel": {"id": post.channel},
        "message": {"ts": post.ts, "thread_ts": post.thread_ts, "text": post.text},
        "container": {"type": "message", "message_ts": post.ts, "channel_id": post.channel},
    }
    if post.ephemeral_to is not None:  # Slack sends no message for an ephemeral one
        del payload["message"]
        payload["container"] = {
            "type": "message",
            "message_ts": post.ts,
            "channel_id": post.channel,
            "is_ephemeral": True,
            **({"thread_ts": post.thread_ts} if post.thread_ts else {}),
        }
    payload |= {
        "trigger_id": f"trig{next(_event_ids)}",
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "b",
                **({"value": button["value"]} if "value" in button else {}),  # not on a link
                "action_ts": message_ts(),
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def slash_command(
    user: str,
    text: str,
    channel: str = "CGEN",
    team: str = TEAM,
    response_url: str = "https://hooks.invalid/cmd",
) -> bytes:
    return urlencode(
        {
            "command": "/parley",
            "text": text,
            "user_id": user,
            "channel_id": channel,
            "team_id": team,
            "trigger_id": f"trig{next(_event_ids)}",
            "response_url": response_url,
            "token": "legacy",
        }
    ).encode()


def app_home_opened(user: str, channel: str = "DANA", tab: str = "messages") -> dict[str, Any]:
    return {
        "type": "app_home_opened",
        "user": user,
        "channel": channel,
        "tab": tab,
        "event_ts": message_ts(),
    }


def app_context_changed(user: str, channel_viewed: str) -> dict[str, Any]:
    entity = {"type": "slack#/types/channel_id", "value": channel_viewed, "team_id": TEAM}
    return {"type": "app_context_changed", "user": user, "context": {"entities": [entity]}}


def agent_session_stopped(
    user: str, channel: str, thread_ts: str, streaming: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "type": "agent_session_stopped",
        "channel": channel,
        "event_ts": message_ts(),
        "streaming_message_ts": list(streaming),
        "thread_ts": thread_ts,
        "user": user,
    }
