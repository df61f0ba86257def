"""How Telegram updates reach the adapter: long polling, or a webhook route.

Nothing is confirmed to Telegram before the handler has stored it: polling moves its offset
past an update only once it is handed over (or dropped as unparseable), and the webhook
answers 2xx only then. While the handler cannot store (`HandoverFailed`), polling backs off
and offers the same update again; the webhook answers 503 so Telegram redelivers.

This is our own loop rather than python-telegram-bot's `Updater`, for two reasons. The
Updater confirms a batch (its next `getUpdates` offset) as soon as the batch is on its
in-memory queue, before anything stored it, so a crash would lose those updates; and it
parses a batch as a whole, so one update PTB cannot read fails every update with it (and
PTB logs the raw batch, message text included). The loop fetches raw JSON, parses each
update alone and skips one it cannot read with a warning. The loop is `loops.repeat`: it
backs off after a failed poll or handover, because Telegram or the store is then down for
everyone and asking again at once only adds load; a RetryAfter is waited out as Telegram
asks. One log line says when updates degrade and one when they recover.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from telegram import Update
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError
from telegram.ext import ExtBot
from telegram.request import BaseRequest

from adapters.base import HandoverFailed
from adapters.health import ApiHealth
from adapters.metrics import WEBHOOK_REJECTED
from adapters.telegram.config import TelegramConfig
from adapters.telegram.inbound import parse_update
from adapters.telegram.stream import seconds
from loops import Backoff, Heartbeat, Running, repeat

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# stopped_message_generation (Bot API 10.3): the stop button on a streamed draft
ALLOWED_UPDATES = ["message", "callback_query", "stopped_message_generation"]
MAX_RETRY_AFTER = 60.0
STOP_GRACE = 5.0  # seconds the cancelled long poll may take to end


@dataclass(kw_only=True)
class TelegramIngress:
    config: TelegramConfig
    bot: ExtBot[int]
    api: ApiHealth  # hears whether getUpdates worked
    initialize: Callable[[], Awaitable[None]]  # the adapter's: signs in once
    process: Callable[[Update], Awaitable[None]]  # the adapter's: hands the update over
    request: BaseRequest  # the long-poll transport, with a read timeout beyond the poll's
    _loops: Running | None = field(default=None, init=False)
    _poller: asyncio.Task[None] | None = field(default=None, init=False)
    _offset: int | None = field(default=None, init=False)
    _signed_in: bool = field(default=False, init=False)
    # Wall-clock time of the last poll whose updates were all handed over (or of the start).
    last_poll: float | None = field(default=None, init=False)
    # the webhook's: why updates are refused for now (polling's is its heartbeat's reason)
    refused: str | None = field(default=None, init=False)
    heartbeat: Heartbeat = field(init=False)

    def __post_init__(self) -> None:
        self.heartbeat = Heartbeat(
            "Telegram updates",
            every=2 * self.config.poll_timeout + self.config.stale_margin,
            away=waited_for,
            backoff=Backoff(first=self.config.backoff, cap=self.config.backoff_max),
            logger=log,
        )

    # --- polling ----------------------------------------------------------------------------

    async def start_polling(self) -> None:
        if self._loops is None:
            self.last_poll = time.time()
            self._signed_in = False
            self._loops = Running(grace=STOP_GRACE)
            self._poller = self._loops.start(
                repeat(
                    self._loops.stop,
                    self.heartbeat,
                    self._poll_once,
                    0.0,  # the long poll itself is the wait
                    asked_wait=asked_wait,
                )
            )

    async def stop_polling(self) -> None:
        """Stop the poller: the stop wins the race against the poll in flight, which is
        cancelled once; an HTTP client that turns that cancellation into a timeout cannot
        make the loop poll again, because the stop stays set."""
        loops, self._loops = self._loops, None
        if loops is not None and await loops.close():
            log.error("Telegram polling did not stop; leaving it behind")

    @property
    def polling(self) -> bool:
        return self._poller is not None and not self._poller.done()

    @property
    def trouble(self) -> str | None:
        return self.heartbeat.reason or None

    def polling_health(self) -> tuple[bool, str]:
        """Whether polling is alive and recent (True when this replica is not polling)."""
        if self._loops is None or self._poller is None:
            return True, "not polling"
        if self._poller.done():
            return False, "polling task ended"
        age = time.time() - (self.last_poll or 0.0)
        limit = 2 * self.config.poll_timeout + self.config.stale_margin
        if age > limit:
            return False, f"no getUpdates for {age:.0f} s ({self.trouble or 'stuck'})"
        return True, f"last getUpdates {age:.1f} s ago"

    async def _poll_once(self) -> None:
        """Sign in (once), fetch updates and confirm each (the next offset) only once it is
        handed over; a failure ends the pass, and the loop backs off and tries again."""
        if not self._signed_in:
            await self.initialize()
            await self.bot.delete_webhook()
            self._signed_in = True
        for raw in await self._fetch():
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if not isinstance(update_id, int):
                log.warning("skipping a Telegram update without an update_id")
                continue
            await self._take(update_id, raw)
            self._offset = update_id + 1
        self.last_poll = time.time()  # polled, and every update handed over

    async def _fetch(self) -> list[Any]:
        """One long poll, as raw JSON."""
        parameters: dict[str, Any] = {
            "timeout": self.config.poll_timeout,
            "allowed_updates": json.dumps(ALLOWED_UPDATES),
        }
        if self._offset is not None:
            parameters["offset"] = self._offset
        url = f"{self.bot.base_url}/getUpdates?{urlencode(parameters)}"
        try:
            result = await self.request.post(url)
        except TelegramError as exc:  # Telegram's trouble, not the store's
            self.api.failed(f"getUpdates: {type(exc).__name__}")
            raise
        self.api.succeeded()
        return result if isinstance(result, list) else []

    async def _take(self, update_id: int, raw: dict[str, Any]) -> None:
        """Hand one update over. One the handler cannot store for now ends the pass (it is
        fetched again after the backoff); one it refuses for good is dropped."""
        update = parse_update(raw, self.bot)
        if update is None:
            log.warning("skipping Telegram update %d: it cannot be parsed", update_id)
            return
        try:
            await self.process(update)
        except Exception as exc:
            if transient(exc):
                raise
            log.warning("dropping Telegram update %d: %s", update_id, type(exc).__name__)

    # --- webhook ----------------------------------------------------------------------------

    def webhook_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/telegram/webhook", self._webhook

    async def _webhook(self, request: web.Request) -> web.Response:
        """200 once the update is stored; 503 (redeliver) if it cannot be yet; 400 if never."""
        secret = self.config.webhook_secret or ""
        given = request.headers.get(SECRET_HEADER, "")
        if not secret or not hmac.compare_digest(given.encode(), secret.encode()):
            WEBHOOK_REJECTED.labels("telegram", "secret").inc()
            return web.json_response({"ok": False, "error": "forbidden"}, status=403)
        try:
            data = json.loads(await request.read())
        except (ValueError, RecursionError):
            data = None
        update_id = data.get("update_id") if isinstance(data, dict) else None
        update = parse_update(data, self.bot)
        if update is None:
            log.warning("refusing Telegram update %s: it cannot be parsed", _named(update_id))
            return web.json_response({"ok": False, "error": "malformed update"}, status=400)
        try:
            await self.initialize()
            await self.process(update)
        except Exception as exc:
            if transient(exc):
                if self.refused is None:
                    log.warning("Telegram updates are refused for now (%s)", type(exc).__name__)
                self.refused = type(exc).__name__
                return web.json_response({"ok": False, "error": "try again"}, status=503)
            log.warning("refusing Telegram update %d: %s", update.update_id, type(exc).__name__)
            return web.json_response({"ok": False, "error": "unprocessable update"}, status=400)
        if self.refused is not None:
            log.info("Telegram updates are taken again (after %s)", self.refused)
            self.refused = None
        return web.json_response({"ok": True})


def transient(exc: BaseException) -> bool:
    """Worth trying again later: the store or Telegram is unreachable, not the update bad."""
    if isinstance(exc, HandoverFailed | RetryAfter):
        return True
    return isinstance(exc, NetworkError) and not isinstance(exc, BadRequest)


def waited_for(exc: BaseException) -> str | None:
    """Polling's `away`: Telegram unreachable or the store unable to take the update now
    (wait and try again); anything else is a fault, logged with its trace."""
    return type(exc).__name__ if transient(exc) or isinstance(exc, TelegramError) else None


def asked_wait(exc: BaseException) -> float | None:
    """A RetryAfter is waited out as Telegram asks (up to a minute)."""
    return min(seconds(exc.retry_after), MAX_RETRY_AFTER) if isinstance(exc, RetryAfter) else None


def _named(update_id: object) -> str:
    return str(update_id) if isinstance(update_id, int) else "without an update_id"
