"""What becomes of an inbox entry that cannot be handled: tried again, then dead-lettered.

An entry that cannot be decoded goes straight to the dead-letter stream. Every try of an
entry is counted in Redis as it begins (so restarts and other workers see the count; the
lock scripts count a holder's first try, `bot/runtime/locks.py`). One whose handling raises
is tried again after a growing pause; one whose tries ended without finishing (its worker
was killed, say by the kernel for memory) is not tried again by whoever takes it up next once
`max_attempts` tries have begun. Either way it is then dead-lettered and the user told.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from adapters.base import Inbound
from bot.ops import metrics
from bot.runtime.keys import Keys, backlog_member
from bot.runtime.reclaimer import GROUP
from loops import exponential

log = logging.getLogger(__name__)

DEAD_LETTER_MAXLEN = 10_000  # approximate; the oldest dead letters go first
ERROR_CHARS = 500  # of an error's text kept with its dead letter
RETRY_DELAY = 0.5  # seconds before a failed entry's second try; doubles, up to RETRY_DELAY_MAX
RETRY_DELAY_MAX = 5.0
OnError = Callable[[str, Inbound], Awaitable[None]]


def dead_letter(
    pipe: Any,
    keys: Keys,
    entry: str,
    fields: dict[bytes, bytes] | None,
    reason: str,
    exc: BaseException,
    *,
    attempts: int,
) -> None:
    """Queue, on `pipe`, the entry's move to the dead-letter stream (with what went wrong)."""
    letter: dict[Any, Any] = {
        "entry": entry,
        "reason": reason,
        "error": type(exc).__name__,
        "message": str(exc)[:ERROR_CHARS],
        "attempts": attempts,
        "event": (fields or {}).get(b"event", b""),
        "failed_at": f"{time.time():.3f}",
    }
    pipe.xadd(keys.dead_letters, letter, maxlen=DEAD_LETTER_MAXLEN, approximate=True)


class CutShort(Exception):
    """Every try of an entry so far ended without finishing: the worker handling it died (or
    lost its lock), so it is not tried again."""


def dead_lettered(entry: str, reason: str) -> None:
    metrics.DEAD_LETTERS.labels(reason).inc()
    log.warning("inbox entry %s moved to the dead-letter stream (%s)", entry, reason)


class Failures:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        max_attempts: int,
        attempts_ttl: float,
        on_error: OnError | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.max_attempts = max_attempts
        self.attempts_ttl_ms = int(attempts_ttl * 1000)
        self.on_error = on_error

    async def settle_unreadable(
        self, settled: list[tuple[str, dict[bytes, bytes] | None, Exception | None]]
    ) -> None:
        """Acknowledge entries read with nothing to do: trimmed away (no fields), or
        undecodable (with the error: dead-lettered first, in the same round trip)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for entry, fields, error in settled:
                if error is not None:
                    dead_letter(pipe, self.keys, entry, fields, "undecodable", error, attempts=0)
                pipe.xack(self.keys.inbox, GROUP, entry)
            await pipe.execute()
        for entry, _, error in settled:
            if error is not None:
                dead_lettered(entry, "undecodable")

    def failed(self, entry: str, exc: Exception, tries: int) -> float:
        """A try (the `tries`th) raised: the pause before the next one, or 0 when the entry
        is out of tries."""
        log.debug("handling %s failed", entry, exc_info=exc)
        if tries < self.max_attempts:
            log.warning(
                "handling %s failed (%s), try %d of %d",
                entry,
                type(exc).__name__,
                tries,
                self.max_attempts,
            )
            return exponential(RETRY_DELAY, RETRY_DELAY_MAX, tries - 1)
        return 0.0

    async def begin_again(self, conversation_id: str, entry: str) -> int:
        """Count the next try of an entry this holder is about to make; the tries so far."""
        key = self.keys.attempts(conversation_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(key, backlog_member(entry), 1)
            pipe.pexpire(key, self.attempts_ttl_ms)
            tries, _ = await pipe.execute()
        return int(tries)

    async def give_up(
        self,
        conversation_id: str,
        entry: str,
        event: Inbound,
        fields: dict[bytes, bytes] | None,
        exc: Exception,
        *,
        attempts: int,
    ) -> None:
        """Dead-letter an entry that used up its tries, and tell its user (the caller acks)."""
        if fields is None:
            found = await self.redis.xrange(self.keys.inbox, min=entry, max=entry)
            fields = found[0][1] if found else {}  # type: ignore[assignment]
        await self.quarantine(conversation_id, entry, fields, "failed", exc, attempts=attempts)
        if self.on_error is not None:
            try:
                await self.on_error(entry, event)
            except Exception:
                log.exception("could not tell the user about %s", entry)

    async def quarantine(
        self,
        conversation_id: str,
        entry: str,
        fields: dict[bytes, bytes] | None,
        reason: str,
        exc: BaseException,
        *,
        attempts: int,
    ) -> None:
        """Dead-letter an entry met while draining (the caller acknowledges it)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            dead_letter(pipe, self.keys, entry, fields, reason, exc, attempts=attempts)
            pipe.hdel(self.keys.attempts(conversation_id), backlog_member(entry))
            await pipe.execute()
        dead_lettered(entry, reason)
