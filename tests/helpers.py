"""Helpers the tests share, each defined once."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

from bot.ops.embedded_redis import free_port

__all__ = ["free_port", "until"]


async def until(
    predicate: Callable[[], bool | Awaitable[bool]], within: float = 30.0, every: float = 0.02
) -> None:
    """Wait until `predicate` (plain or async) holds; fail after `within` seconds. The bound is
    generous on purpose: CI machines are slow and loaded, and a passing test never waits it."""
    deadline = time.monotonic() + within
    while True:
        held = predicate()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(every)
