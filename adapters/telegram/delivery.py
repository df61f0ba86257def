"""How a send to Telegram waits and fails: PTB's rate limiter, and PTB's errors mapped once.

Every Bot API call goes through python-telegram-bot's `AIORateLimiter`, which waits out a
429 `RetryAfter` a few times and holds every other call back meanwhile. A wait longer than
`max_wait` is not waited out: the error surfaces at once, so the outbox parks the message
instead of holding a worker for minutes. The limiter's own flood limits (30 messages a
second overall, 20 a minute per group) are off: Telegram enforces its limits itself with
RetryAfter, and a fixed cap of 30 a second would hold the whole service below the 200
replies a second it is measured at (`bench_service`).
Calls are awaited one after another per conversation, so the limiter keeps their order.

`delivery()` is the one place PTB's errors become the adapter error tree: a refusal that
trying again cannot change (`Forbidden`, `BadRequest`, `InvalidToken`, `ChatMigrated`) is
`Undeliverable`; the network, a timeout, a RetryAfter still in force and anything else is
`DeliveryFailed`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.ext import AIORateLimiter

from adapters.base import DeliveryFailed, Undeliverable
from adapters.health import ApiHealth
from adapters.telegram.stream import seconds

Result = bool | dict[str, Any] | list[dict[str, Any]]


class _WaitTooLong(Exception):
    def __init__(self, cause: RetryAfter) -> None:
        super().__init__(str(cause))
        self.cause = cause


class RateLimiter(AIORateLimiter):
    """PTB's limiter, but a RetryAfter over `max_wait` seconds is raised, not slept through."""

    def __init__(self, *, max_retries: int, max_wait: float) -> None:
        super().__init__(overall_max_rate=0, group_max_rate=0, max_retries=max_retries)
        self.max_wait = max_wait

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Result]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Result:
        async def capped(*call_args: Any, **call_kwargs: Any) -> Result:
            try:
                return await callback(*call_args, **call_kwargs)
            except RetryAfter as exc:
                if seconds(exc.retry_after) > self.max_wait:
                    raise _WaitTooLong(exc) from exc
                raise

        try:
            return await super().process_request(
                capped, args, kwargs, endpoint, data, rate_limit_args
            )
        except _WaitTooLong as exc:
            raise exc.cause from None


@contextlib.contextmanager
def observed(health: ApiHealth) -> Iterator[None]:
    """Tell `health` whether Telegram answered; PTB's errors pass unchanged."""
    try:
        yield
    except TelegramError as exc:
        if isinstance(exc, InvalidToken) or not _refusal(exc):
            health.failed(type(exc).__name__)
        else:
            health.succeeded()  # Telegram answered, only not as asked
        raise
    health.succeeded()


@contextlib.contextmanager
def delivery(health: ApiHealth) -> Iterator[None]:
    """Bot API errors as DeliveryError; `health` hears whether Telegram answered."""
    try:
        with observed(health):
            yield
    except TelegramError as exc:
        if _refusal(exc):
            raise Undeliverable(exc.message) from exc
        raise DeliveryFailed(exc.message) from exc


def _refusal(exc: TelegramError) -> bool:
    return isinstance(exc, BadRequest | Forbidden | InvalidToken | ChatMigrated)
