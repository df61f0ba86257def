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
update alone and skips one it cannot read with a warning. It backs off (exponential,
jittered, capped) after a failed poll or handover, because Telegram or the store is then
down for everyone and asking again at once only adds load; a RetryAfter is waited out as
Telegram asks. One log line says when updates stop flowing and one when they flow again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import random
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
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_random_exponential

from adapters.base import HandoverFailed
from adapters.health import ApiHealth
from adapters.metrics import WEBHOOK_REJECTED
from adapters.telegram.config import TelegramConfig
from adapters.telegram.inbound import parse_update
from adapters.telegram.stream import seconds

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# stopped_message_generation (Bot API 10.3): the stop button on a streamed draft
ALLOWED_UPDATES = ["message", "callback_query", "stopped_message_generation"]
MAX_RETRY_AFTER = 60.0
STOP_TRIES, STOP_WAIT = 20, 0.5  # cancellations of the poller at stop, seconds between


@dataclass(kw_only=True)
class TelegramIngress:
    config: TelegramConfig
    bot: ExtBot[int]
    api: ApiHealth  # hears whether getUpdates worked
    initialize: Callable[[], Awaitable[None]]  # the adapter's: signs in once
    process: Callable[[Update], Awaitable[None]]  # the adapter's: hands the update over
    request: BaseRequest  # the long-poll transport, with a read timeout beyond the poll's
    _poller: asyncio.Task[None] | None = field(default=None, init=False)
    _offset: int | None = field(default=None, init=False)
    # Wall-clock time of the last successful getUpdates (or of the start of polling).
    last_poll: float | None = field(default=None, init=False)
    trouble: str | None = field(default=None, init=False)
    _stopping: bool = field(default=False, init=False)

    # --- polling ----------------------------------------------------------------------------

    async def start_polling(self) -> None:
        if self._poller is None:
            self.last_poll = time.time()
            self._stopping = False
            self._poller = asyncio.create_task(self._supervise())

    async def stop_polling(self) -> None:
        """Stop the poller. One cancellation may not do: the HTTP client can lose it (a read
        timeout due in the same moment reports TimedOut instead, and a failed poll is tried
        again), so the loops also look at `_stopping` and the cancel is repeated."""
        poller, self._poller = self._poller, None
        self._stopping = True
        if poller is None:
            return
        for _ in range(STOP_TRIES):
            poller.cancel()
            done, _ = await asyncio.wait({poller}, timeout=STOP_WAIT)
            if done:
                with contextlib.suppress(asyncio.CancelledError):
                    await poller
                return
        log.error("Telegram polling did not stop; leaving it behind")

    @property
    def polling(self) -> bool:
        return self._poller is not None and not self._poller.done()

    def polling_health(self) -> tuple[bool, str]:
        """Whether polling is alive and recent (True when this replica is not polling)."""
        if self._poller is None:
            return True, "not polling"
        if self._poller.done():
            return False, "polling task ended"
        age = time.time() - (self.last_poll or 0.0)
        limit = 2 * self.config.poll_timeout + self.config.stale_margin
        if age > limit:
            return False, f"no getUpdates for {age:.0f} s ({self.trouble or 'stuck'})"
        return True, f"last getUpdates {age:.1f} s ago"

    async def _supervise(self) -> None:
        """Poll; should polling ever end on an error, say so and start it again."""
        delay = self.config.backoff
        while not self._stopping:
            started = time.time()
            try:
                await self.initialize()
                await self.bot.delete_webhook()
                await self._poll_forever()
                return  # stopping
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._stopping:
                    return
                if (self.last_poll or 0.0) > started:
                    delay = self.config.backoff  # it had worked: start the backoff afresh
                log.exception("Telegram polling stopped unexpectedly; restarting in %.1f s", delay)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.config.backoff_max)

    async def _poll_forever(self) -> None:
        """Fetch updates and confirm each (the next offset) only once it is handed over."""
        while not self._stopping:
            for raw in await self._fetch():
                update_id = raw.get("update_id") if isinstance(raw, dict) else None
                if not isinstance(update_id, int):
                    log.warning("skipping a Telegram update without an update_id")
                    continue
                await self._take(update_id, raw)
                self._offset = update_id + 1

    async def _fetch(self) -> list[Any]:
        """One long poll, as raw JSON, retried with backoff while Telegram is unreachable."""
        parameters: dict[str, Any] = {
            "timeout": self.config.poll_timeout,
            "allowed_updates": json.dumps(ALLOWED_UPDATES),
        }
        if self._offset is not None:
            parameters["offset"] = self._offset
        url = f"{self.bot.base_url}/getUpdates?{urlencode(parameters)}"
        async for attempt in self._retrying(lambda exc: isinstance(exc, TelegramError)):
            with attempt:
                result = await self.request.post(url)
        self.last_poll = time.time()
        self.api.succeeded()
        self.recovered()
        return result if isinstance(result, list) else []

    async def _take(self, update_id: int, raw: dict[str, Any]) -> None:
        """Hand one update over, waiting out a handler that cannot store it for now."""
        update = parse_update(raw, self.bot)
        if update is None:
            log.warning("skipping Telegram update %d: it cannot be parsed", update_id)
            return
        try:
            async for attempt in self._retrying(transient):
                with attempt:
                    await self.process(update)
        except Exception as exc:
            log.warning("dropping Telegram update %d: %s", update_id, type(exc).__name__)
            return
        self.recovered()

    def _retrying(self, retry_on: Callable[[BaseException], bool]) -> AsyncRetrying:
        """Retries for as long as it takes, backing off (jittered); waits out RetryAfter."""
        backoff = wait_random_exponential(
            multiplier=self.config.backoff, max=self.config.backoff_max
        )

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, RetryAfter):
                return min(seconds(exc.retry_after), MAX_RETRY_AFTER)
            return float(backoff(state))

        return AsyncRetrying(
            retry=retry_if_exception(retry_on),
            wait=wait,
            before_sleep=self._degraded,
            reraise=True,
        )

    def _degraded(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        trouble = type(exc).__name__
        if isinstance(exc, TelegramError):  # Telegram's trouble, not the store's
            self.api.failed(f"getUpdates: {trouble}")
        if self.trouble is None:
            log.warning("Telegram updates are waiting (%s); retrying with backoff", trouble)
        self.trouble = trouble

    def recovered(self) -> None:
        if self.trouble is not None:
            log.info("Telegram updates flow again (after %s)", self.trouble)
            self.trouble = None

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
                if self.trouble is None:
                    log.warning("Telegram updates are refused for now (%s)", type(exc).__name__)
                self.trouble = type(exc).__name__
                return web.json_response({"ok": False, "error": "try again"}, status=503)
            log.warning("refusing Telegram update %d: %s", update.update_id, type(exc).__name__)
            return web.json_response({"ok": False, "error": "unprocessable update"}, status=400)
        self.recovered()
        return web.json_response({"ok": True})


def transient(exc: BaseException) -> bool:
    """Worth trying again later: the store or Telegram is unreachable, not the update bad."""
    if isinstance(exc, HandoverFailed | RetryAfter):
        return True
    return isinstance(exc, NetworkError) and not isinstance(exc, BadRequest)


def _named(update_id: object) -> str:
    return str(update_id) if isinstance(update_id, int) else "without an update_id"
