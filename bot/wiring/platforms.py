"""The chat platforms configured in settings: built, routed, started and stopped together.

An adapter exists when its credentials are present. In a gateway it receives (Slack over
HTTP or Socket Mode, Telegram by webhook or by polling on the one replica holding the
polling lease); in a worker it only sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.asyncio as aioredis

from adapters.base import ChatAdapter, InboundHandler
from bot.config import Settings
from bot.ops.health import Health
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys
from bot.runtime.leases import Lease

log = logging.getLogger(__name__)


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
        self.telegram = self._telegram()
        self.slack = self._slack()

    def _telegram(self):  # type: ignore[no-untyped-def]
        config = self.settings.telegram
        if config.token is None:
            return None
        from adapters.telegram import TelegramAdapter, TelegramConfig
        from adapters.telegram_inbound import MAX_TEXT as TELEGRAM_MAX_TEXT

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
                max_message_chars=self.settings.agent.max_message_chars or TELEGRAM_MAX_TEXT,
                poll_timeout=config.poll_timeout,
                max_file_bytes=int(self.settings.attachments.max_file_mb * 1024 * 1024),
                degraded_after=self.settings.http.platform_degraded_after,
            ),
            handler=self.handler,
        )
        self.adapters["telegram"] = adapter
        return adapter

    def _slack(self):  # type: ignore[no-untyped-def]
        config = self.settings.slack
        if config.bot_token is None:
            return None
        from adapters.slack import SlackAdapter, SlackConfig
        from adapters.slack_inbound import MAX_TEXT as SLACK_MAX_TEXT

        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token=config.bot_token.get_secret_value(),
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
                degraded_after=self.settings.http.platform_degraded_after,
            ),
            handler=self.handler,
        )
        self.adapters["slack"] = adapter
        return adapter

    def register_routes(self, http: HttpServer) -> None:
        if self.telegram is not None and self.settings.telegram.mode == "webhook":
            http.add_route(*self.telegram.webhook_route())
        if self.slack is not None and self.settings.slack.app_token is None:
            http.add_route(*self.slack.slack_route())

    async def start_receiving(self, stop: asyncio.Event) -> None:
        if self.telegram is not None:
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
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        if self.slack is not None:
            await self.slack.start()

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
        """Ready when every configured platform is: signed in, receiving (Socket Mode connected,
        a webhook route or registration, polling alive on the replica that polls), and its API
        not failing for a while."""
        if not self.adapters:
            return True, "none configured"
        found: list[tuple[str, bool, str]] = []
        if self.telegram is not None:
            lease = self._polling_lease
            if lease is not None and not lease.tried:  # signed in, but nobody polls yet
                found.append(("telegram", False, "polling: trying for the polling lease"))
            else:
                found.append(("telegram", *self.telegram.health()))
        if self.slack is not None:
            found.append(("slack", *(await self.slack.health())))
        ready = all(ok for _, ok, _ in found)
        return ready, "; ".join(f"{name}: {detail}" for name, _, detail in found)
