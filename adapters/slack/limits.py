"""Slack's rate limits on history reads, honoured without sleeping through a run.

Apps outside the Slack Marketplace get reduced limits on `conversations.history` and
`conversations.replies` (Slack's rate-limit page, since 2025-05-29): a 429 with a
`Retry-After` of up to a minute. Those reads go through a client without slack_sdk's
rate-limit retry; a 429 becomes `HistoryLimited`, and until its `Retry-After` has passed no
read of that method is sent at all. A short one (`wait`) is waited once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from slack_sdk.errors import SlackApiError

from adapters.base import HistoryLimited

log = logging.getLogger(__name__)

T = TypeVar("T")
UNSAID = 60.0  # seconds assumed when a 429 names no Retry-After
LONGEST = 3600.0


@dataclass(kw_only=True)
class HistoryLimits:
    wait: float = 2.0  # seconds of Retry-After waited once; longer: HistoryLimited
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _until: dict[str, float] = field(default_factory=dict)  # method -> when it may be read

    async def read(self, method: str, fetch: Callable[[], Awaitable[T]]) -> T:
        for attempt in (1, 2):
            if (left := self._until.get(method, 0.0) - self.clock()) > 0:
                raise HistoryLimited(left)  # Slack's Retry-After still in force: not sent
            try:
                return await fetch()
            except SlackApiError as exc:
                if exc.response.status_code != 429:
                    raise
                wait = retry_after(exc)
                self._until[method] = self.clock() + wait
                log.info("Slack rate-limits %s for %.0f s", method, wait)
                if attempt == 2 or wait > self.wait:
                    raise HistoryLimited(wait) from exc
                await self.sleep(wait)
                self._until.pop(method, None)
        raise AssertionError("unreachable")


def retry_after(exc: SlackApiError) -> float:
    """Slack's Retry-After in seconds (a minute when it does not say, at most an hour)."""
    headers = exc.response.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        seconds = float(value) if value is not None else UNSAID
    except (TypeError, ValueError):
        return UNSAID
    return min(max(seconds, 0.0), LONGEST) if seconds == seconds else UNSAID  # NaN: unsaid
