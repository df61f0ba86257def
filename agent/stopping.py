"""Stopping a run from outside, at its next step boundary.

A host hands a run an `asyncio.Event` and sets it when the person who asked says stop. From
then on the loop makes no model call and starts no tool: a model call in flight is
abandoned, while calls already running (an approved action among them) finish and are
reported. The run then ends `Failed(reason="stopped")`, its state consistent as history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

NOT_RUN = "Not run: the user stopped the run before this call."


class RunStopped(Exception):
    """Control flow, not an error: the run was told to stop."""


def check(stop: asyncio.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise RunStopped


async def unless_stopped(stop: asyncio.Event | None, work: Coroutine[Any, Any, T]) -> T:
    """`work`'s result, or RunStopped (with `work` cancelled) if `stop` is set first."""
    if stop is None:
        return await work
    if stop.is_set():
        work.close()
        raise RunStopped
    task = asyncio.create_task(work)
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, waiter):
            if not pending.done():
                pending.cancel()
        for pending in (task, waiter):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(pending, return_exceptions=True)
    if task.cancelled():
        raise RunStopped
    return task.result()
