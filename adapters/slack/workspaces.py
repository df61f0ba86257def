"""One bot token per workspace: which Web API client a call goes out with.

With `SLACK_BOT_TOKEN` there is one client and this module is not used. Installed through
OAuth (`SLACK_CLIENT_ID` / `SLACK_CLIENT_SECRET`), each workspace (or org-wide install) has
its own token in the installation store. The adapter's parts keep calling `client.<method>`;
the client they hold is a `RoutingClient`, which sends each call with the client of the
workspace the current task works for. That workspace is set where it is known: a Bolt
request (Bolt found its token), a call naming a conversation, or the worker saying which
conversation it handles (`enter`); a task copies it into the tasks it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.oauth.installation_store import Bot
from slack_sdk.web.async_client import AsyncWebClient

from adapters.health import ApiHealth
from loops import Backoff, Heartbeat, Running, pause

log = logging.getLogger(__name__)

# a token found is reused this long; an uninstall or a revoked token anywhere forgets it at the
# next lookup in every process (`removals`: one counter read per lookup, no token read)
CACHE_SECONDS = 60.0
# a removal the store could not take (Redis away) is tried again after a backoff up to this
REMOVAL_RETRY_CAP = 5.0


class RemovalWaits(Exception):
    """An uninstall or a revoked token that could not be stored yet: Slack is answered 503
    (it sends the event again), and this process stores it as soon as the store is back."""


# the current task's workspace: its bot token and Parley's user id there
_current: contextvars.ContextVar[tuple[str, str | None] | None] = contextvars.ContextVar(
    "slack_workspace", default=None
)


class Installations(Protocol):
    """The part of the installation store the adapter uses (bot/runtime/slack_installs.py)."""

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None: ...

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None: ...

    async def note_team(self, enterprise_id: str, team_id: str) -> None: ...

    async def removals(self) -> int: ...


@dataclass(kw_only=True)
class Workspaces:
    store: Installations
    api_url: str
    session: aiohttp.ClientSession | None = None
    # (token, reads) -> client; `reads`: without the SDK's rate-limit retry (limits.py)
    _clients: dict[tuple[str, bool], AsyncWebClient] = field(default_factory=dict)
    # team -> when it was looked up, its token and Parley's user id there
    _found: dict[str, tuple[float, str, str | None]] = field(default_factory=dict)
    _noted: set[tuple[str, str]] = field(default_factory=set)
    _removals: int = 0  # the store's count of removals when `_found` was last trusted
    # removals (enterprise, team) heard but not stored yet, tried again in the background
    _unstored: set[tuple[str | None, str | None]] = field(default_factory=set)
    _retrying: Running | None = None
    removals: Heartbeat = field(
        default_factory=lambda: Heartbeat(
            "Slack removals",
            every=float("inf"),  # beats only when a removal is stored: never "wedged"
            backoff=Backoff(first=0.5, cap=REMOVAL_RETRY_CAP),
            logger=log,
        )
    )

    def client(self, token: str, *, reads: bool = False) -> AsyncWebClient:
        client = self._clients.get((token, reads))
        if client is None:
            client = AsyncWebClient(
                token=token or None,
                base_url=self.api_url,
                session=self.session,
                retry_handlers=[]
                if reads
                else [AsyncRateLimitErrorRetryHandler(max_retry_count=3)],
            )
            self._clients[(token, reads)] = client
        return client

    def opened(self, session: aiohttp.ClientSession | None) -> None:
        """One HTTP session for every workspace's calls (None: closed)."""
        self.session = session
        for client in self._clients.values():
            client.session = session

    async def close(self) -> None:
        retrying, self._retrying = self._retrying, None
        if retrying is not None:
            await retrying.close()
        session = self.session
        self.opened(None)
        if session is not None:
            await session.close()

    async def enter(self, team_id: str | None) -> None:
        """Calls of this task (and the tasks it starts) go out with `team_id`'s token."""
        if team_id is None:
            return
        token, me = await self._lookup(team_id)
        _current.set((token, me))

    def bind(self, token: str | None, bot_user_id: str | None) -> None:
        """Bolt authorised this request with the workspace's token."""
        _current.set((token or "", bot_user_id))

    async def _lookup(self, team_id: str) -> tuple[str, str | None]:
        if self._unstored:  # stored first, so no token of a removed workspace is read back
            await self._store_removals()
        await self._forget_removed()
        cached = self._found.get(team_id)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        bot = await self.store.async_find_bot(enterprise_id=None, team_id=team_id)
        token = (bot.bot_token if bot is not None else None) or ""
        me = bot.bot_user_id if bot is not None else None
        if not token:
            log.warning("no Slack installation serves workspace %s", team_id)
        self._found[team_id] = (time.monotonic(), token, me)
        return token, me

    async def note(self, enterprise_id: str | None, team_id: str | None) -> None:
        """An event of an org-wide install came from `team_id`: remember its organisation."""
        if not enterprise_id or not team_id:
            return
        await self._forget_removed()
        if (enterprise_id, team_id) in self._noted:
            return
        await self.store.note_team(enterprise_id, team_id)
        self._noted.add((enterprise_id, team_id))

    async def removed(self, enterprise_id: str | None, team_id: str | None) -> None:
        """The app was uninstalled there, or its bot token revoked: forget all of it. While
        the store is away (`RemovalWaits`), the removal is kept here and stored once it is
        back; meanwhile this process looks up no token, and the others cannot read theirs
        (each lookup reads the store's count of removals)."""
        self._found.clear()
        self._noted.clear()
        self._unstored.add((enterprise_id, team_id))
        await self._store_removals()

    async def _store_removals(self) -> None:
        try:
            for enterprise_id, team_id in sorted(self._unstored, key=str):
                await self.store.async_delete_all(enterprise_id=enterprise_id, team_id=team_id)
                self._unstored.discard((enterprise_id, team_id))
        except Exception as exc:
            self.removals.degraded(f"{len(self._unstored)} not stored: {type(exc).__name__}")
            if self._retrying is None:
                self._retrying = Running()
                self._retrying.start(self._retry(self._retrying.stop))
            raise RemovalWaits("a Slack removal waits for the installation store") from exc
        self._found.clear()
        self._noted.clear()
        if self.removals.state == "degraded":
            self.removals.beat()  # "recovered", once

    async def _retry(self, stop: asyncio.Event) -> None:
        """Store the waiting removals, backing off while the store is away."""
        while self._unstored and not stop.is_set():
            await pause(stop, self.removals.backoff.next())
            with contextlib.suppress(RemovalWaits):
                await self._store_removals()
        self._retrying = None

    def status(self, api: ApiHealth) -> tuple[bool, str]:
        """The Web API's health, and removals waiting for the store, if any (degraded)."""
        ok, trouble = api.status()
        if self.removals.state != "degraded":
            return ok, trouble
        waits = f"uninstalls degraded: {self.removals.reason}"
        return ok, f"{trouble}, {waits}" if trouble else waits

    async def _forget_removed(self) -> None:
        """An installation was removed since (by this process or another): forget every
        token and link cached, which may belong to it."""
        removals = await self.store.removals()
        if removals != self._removals:
            self._found.clear()
            self._noted.clear()
            self._removals = removals

    def current(self, *, reads: bool = False) -> AsyncWebClient:
        found = _current.get()
        return self.client(found[0] if found else "", reads=reads)

    def bot_user_id(self) -> str | None:
        found = _current.get()
        return found[1] if found else None


class RoutingClient:
    """Looks like an AsyncWebClient; each call goes out with the current workspace's client."""

    def __init__(self, workspaces: Workspaces, *, reads: bool = False) -> None:
        self._workspaces = workspaces
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workspaces.current(reads=self._reads), name)
