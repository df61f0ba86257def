"""The chat platforms configured in settings: built, routed, started and stopped together.

An adapter exists when its credentials are present. In a gateway it receives (Slack over
HTTP or Socket Mode, Telegram by webhook or by polling on the one replica holding the
polling lease); in a worker it only sends. Each platform stands alone: one that cannot be
reached at start keeps being tried in the background while the others serve, and one whose
API fails makes only itself not ready (`check_of`); the gateway is ready while any is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from adapters.base import (
    InboundHandler,
)
from adapters.platform import ChatAdapter
from bot.config import Settings
from bot.features.agent_sessions import RedisSessionDirectory
from bot.features.schedules.store import Schedule
from bot.ops.health import Backoff, Health, pause
from bot.ops.http import HttpServer, Route
from bot.runtime.keys import Keys
from bot.runtime.leases import Lease
from bot.runtime.pairing import Pairings, access_line

log = logging.getLogger(__name__)

NO_PLATFORM = (
    "no chat platform configured: set SLACK_BOT_TOKEN or TELEGRAM_BOT_TOKEN "
    "(in .env; README: Connect Slack, Connect Telegram)"
)
START_RETRY_MAX = 30.0  # seconds between tries to start a platform that was down at start


class Platforms:
    def __init__(
        self,
        settings: Settings,
        redis: aioredis.Redis,
        keys: Keys,
        handler: InboundHandler | None,
        health: Health | None = None,
    ) -> None:
        self.settings = settings
        self.health = health
        self.redis = redis
        self.keys = keys
        self.handler = handler
        self.adapters: dict[str, ChatAdapter] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop_lease = asyncio.Event()
        self._polling_lease: Lease | None = None
        self.offers: Any = None  # PromptOffers: Telegram's prompts to offer again (reoffers.py)
        self.telegram = self._telegram()
        self.slack = self._slack()

    def _telegram(self):  # type: ignore[no-untyped-def]
        config = self.settings.telegram
        if config.token is None:
            return None
        from adapters.telegram import TelegramAdapter, TelegramConfig
        from adapters.telegram.inbound import MAX_TEXT as TELEGRAM_MAX_TEXT
        from bot.features.reoffers import PromptOffers

        if config.reoffer_after > 0:
            self.offers = PromptOffers(self.redis, self.keys)

        adapter = TelegramAdapter(
            config=TelegramConfig(
                token=config.token.get_secret_value(),
                api_url=config.api_url,
                mode=config.mode,
                webhook_url=config.webhook_url,
                webhook_secret=(
                    config.webhook_secret.get_secret_value() if config.webhook_secret else None
                ),
                allowed_users=tuple(config.allowed_users),
                open_access=config.access == "open",
                max_message_chars=self.settings.agent.max_message_chars or TELEGRAM_MAX_TEXT,
                poll_timeout=config.poll_timeout,
                max_file_bytes=int(self.settings.attachments.max_file_mb * 1024 * 1024),
                degraded_after=self.settings.http.platform_degraded_after,
                ephemeral_prompts=config.ephemeral_prompts,
                reoffer_after=config.reoffer_after,
            ),
            handler=self.handler,
            pairing=Pairings(self.redis, self.keys) if config.access == "pairing" else None,
        )
        if self.offers is not None:  # kept in Redis; a worker's loop has this adapter send them
            adapter.reoffers.store = self.offers
            self.offers.deliver = adapter.reoffers.offer
        if self.handler is not None:  # where it receives: say who may talk to it
            log.info("Telegram access: %s", access_line(self.settings))
        self.adapters["telegram"] = adapter
        return adapter

    def _slack(self):  # type: ignore[no-untyped-def]
        config = self.settings.slack
        if config.bot_token is None and not config.installs:
            return None
        from adapters.slack import SlackAdapter, SlackConfig
        from adapters.slack.config import MAX_TEXT as SLACK_MAX_TEXT

        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token=config.bot_token.get_secret_value() if config.bot_token else "",
                signing_secret=(
                    config.signing_secret.get_secret_value() if config.signing_secret else None
                ),
                app_token=config.app_token.get_secret_value() if config.app_token else None,
                api_url=config.api_url,
                allowed_teams=tuple(config.allowed_teams),
                allowed_channels=tuple(config.allowed_channels),
                approver_groups=tuple(
                    a for a in self.settings.access.approvers if a.startswith("S")
                ),
                max_message_chars=self.settings.agent.max_message_chars or SLACK_MAX_TEXT,
                greeting=config.greeting,
                suggested_prompts=tuple(config.suggested_prompts),
                surface=config.surface,
                team_memories=config.team_memories,
                history_wait=config.history_wait,
                degraded_after=self.settings.http.platform_degraded_after,
                **self._slack_installs(),
            ),
            handler=self.handler,
            sessions=RedisSessionDirectory(
                self.redis, self.keys, ttl=self.settings.runtime.session_ttl
            ),
            **self._slack_stores(),
        )
        self.adapters["slack"] = adapter
        return adapter

    def _slack_installs(self) -> dict[str, Any]:
        config = self.settings.slack
        if not config.installs:
            return {}
        assert config.client_secret is not None
        return {
            "client_id": config.client_id,
            "client_secret": config.client_secret.get_secret_value(),
            "scopes": tuple(config.scopes),
            "public_url": self.settings.mcp.public_url,
        }

    def _slack_stores(self) -> dict[str, Any]:
        """With OAuth installs: the installation and state stores (slack_installs.py)."""
        if not self.settings.slack.installs:
            return {}
        from bot.runtime.slack_installs import RedisInstallations, RedisOAuthStates

        secret = self.settings.mcp.secret_key
        if secret is None or not self.settings.mcp.public_url:
            raise RuntimeError(
                "SLACK_CLIENT_ID / SLACK_CLIENT_SECRET need PARLEY_SECRET_KEY (tokens are kept "
                "encrypted) and PARLEY_PUBLIC_URL (Slack's redirect)"
            )
        return {
            "installations": RedisInstallations(
                self.redis,
                self.keys,
                secret_key=secret.get_secret_value(),
                allowed_teams=self.settings.slack.allowed_teams,
            ),
            "oauth_states": RedisOAuthStates(self.redis, self.keys),
        }

    def routes(self) -> list[Route]:
        """The platforms' public routes: Telegram's webhook, Slack's events (not with Socket
        Mode)."""
        routes: list[Route] = []
        if self.telegram is not None and self.settings.telegram.mode == "webhook":
            routes.append(self.telegram.webhook_route())
        if self.slack is not None and self.settings.slack.app_token is None:
            routes.append(self.slack.slack_route())
        if self.slack is not None:
            routes.extend(self.slack.oauth_routes())  # Add to Slack, with OAuth installs
        return routes

    def register_routes(self, http: HttpServer) -> None:
        for route in self.routes():
            http.add_route(*route)

    async def start_receiving(self, stop: asyncio.Event) -> None:
        """Start each platform; one that cannot be reached now is tried again in the
        background, so the others serve meanwhile."""
        starts = {"telegram": self._start_telegram, "slack": self._start_slack}
        for name in [n for n in starts if n in self.adapters]:
            try:
                await starts[name]()
            except Exception as exc:
                log.warning(
                    "%s could not start (%s); trying again in the background",
                    name,
                    type(exc).__name__,
                )
                self._track(asyncio.create_task(self._keep_starting(name, starts[name])))

    async def _keep_starting(self, name: str, start: Callable[[], Awaitable[None]]) -> None:
        backoff = Backoff(first=1.0, cap=START_RETRY_MAX)
        while not self._stop_lease.is_set():
            await pause(self._stop_lease, backoff.next())
            if self._stop_lease.is_set():
                return
            try:
                await start()
            except Exception as exc:
                log.debug("%s still cannot start (%s)", name, type(exc).__name__)
                continue
            log.info("%s started", name)
            return

    async def _start_telegram(self) -> None:
        assert self.telegram is not None
        await self.telegram.start()
        if self.settings.telegram.mode == "polling":
            lease = Lease(self.redis, self.keys.lease("telegram-polling"), health=self.health)
            self._polling_lease = lease
            task = asyncio.create_task(
                lease.hold_while(
                    self._stop_lease, self.telegram.start_polling, self.telegram.stop_polling
                )
            )
            if self.health is not None:
                self.health.watch(lease.heartbeat, task)
            self._track(task)

    async def _start_slack(self) -> None:
        assert self.slack is not None
        await self.slack.start()

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop_receiving(self) -> None:
        self._stop_lease.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.telegram is not None:
            await self.telegram.stop_polling()
        if self.slack is not None:
            await self.slack.stop_receiving()

    async def close(self) -> None:
        await self.stop_receiving()
        for adapter in self.adapters.values():
            with contextlib.suppress(Exception):
                await adapter.stop()

    async def check(self) -> tuple[bool, str]:
        """Ready while any configured platform is (each in `check_of`); with none, ready only
        when triggers can still arrive, and either way the detail says no platform is set."""
        if not self.adapters:
            if self.settings.schedules.triggers_config is not None:
                return True, f"{NO_PLATFORM.partition(':')[0]}; triggers arrive on /hooks"
            return False, NO_PLATFORM
        found = [(name, *(await self._one(name))) for name in self.adapters]
        ready = any(ok for _, ok, _ in found)
        return ready, "; ".join(f"{name}: {detail}" for name, _, detail in found)

    def register_checks(self, http: HttpServer) -> None:
        """`platforms` (the gateway's readiness) and each platform's own, shown beside it."""
        http.add_check("platforms", self.check)
        for name in self.adapters:
            http.add_check(name, self.check_of(name), required=False)

    def check_of(self, name: str) -> Callable[[], Awaitable[tuple[bool, str]]]:
        """One platform's readiness, for `/readyz` to show beside the gateway's."""

        async def check() -> tuple[bool, str]:
            return await self._one(name)

        return check

    async def _one(self, name: str) -> tuple[bool, str]:
        """Ready when signed in, receiving (Socket Mode connected, a webhook route or
        registration, polling alive on the replica that polls), and the API not failing for
        a while."""
        if name == "telegram" and self.telegram is not None:
            lease = self._polling_lease
            if lease is not None and not lease.tried:  # signed in, but nobody polls yet
                return False, "polling: trying for the polling lease"
            ok, detail = self.telegram.health()
            return ok, detail
        if name == "slack" and self.slack is not None:
            ok, detail = await self.slack.health()
            return ok, detail
        return False, "not configured"


def owner_allowed(settings: Settings, pairings: Pairings) -> Callable[[Schedule], Awaitable[bool]]:
    """Whether a schedule's owner may still talk to Parley where it runs: the allowlists of
    its conversation, and on Telegram in pairing mode (the default) the paired set too."""

    async def allowed(found: Schedule) -> bool:
        if found.platform == "telegram":
            users = settings.telegram.allowed_users
            if found.owner_id in users:
                return True
            if settings.telegram.access == "pairing":  # checked now: a pairing can be revoked
                return await pairings.admitted(found.owner_id)
            return not users
        if found.platform == "slack":
            teams, channels = settings.slack.allowed_teams, settings.slack.allowed_channels
            chat = found.conversation_id.split(":")[2]
            team_ok = not teams or (found.team_id or "") in teams
            return team_ok and (not channels or chat in channels)
        return True

    return allowed
