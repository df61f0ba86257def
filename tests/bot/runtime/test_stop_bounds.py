"""The stop is bounded: after the drain, work that ignores its cancellation is named in one
line and left behind, its entry still pending for another worker."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis.asyncio as aioredis

from adapters.base import Inbound
from bot.ops.shutdown import describe, settle
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks, Holding
from bot.runtime.worker import GROUP, Worker
from tests.bot.recording import dm, message


async def test_a_drain_leaves_behind_a_run_that_ignores_its_cancellation(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.runtime.worker")
    keys = Keys()
    started, done = asyncio.Event(), asyncio.Event()

    async def stubborn_tool(entry_id: str, event: Inbound, holding: Holding) -> None:
        started.set()
        while not done.is_set():
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:  # as a careless tool does
                continue

    worker = Worker(redis, keys, ConversationLocks(redis, keys, lease=5, ttl=60), stubborn_tool)
    await worker.ensure_group()
    reading = asyncio.create_task(worker.run())
    try:
        await Inbox(redis, keys, dedup_ttl=60).submit(message(dm(), "hello"))
        await asyncio.wait_for(started.wait(), 20)
        worker.stop()
        began = time.monotonic()
        await asyncio.wait_for(worker.drain(0.2, 0.5), 10)  # was: waited for ever
        assert time.monotonic() - began < 2
        await worker.leave()
    finally:
        done.set()
        await reading
        if worker._tasks:  # let the stubborn run end before the loop closes
            await asyncio.wait(set(worker._tasks), timeout=10)
    said = [r.getMessage() for r in caplog.records if "still running after" in r.getMessage()]
    assert len(said) == 1 and " in while_held at bot/runtime/holding.py:" in said[0]
    pending = await redis.xpending_range(keys.inbox, GROUP, min="-", max="+", count=10)
    assert len(pending) == 1  # handed back: another worker takes it up


async def test_settle_names_each_task_by_the_line_it_waits_at() -> None:
    async def polite() -> None:
        await asyncio.sleep(10)

    async def deaf() -> None:
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if quit_now.is_set():
                    return

    quit_now = asyncio.Event()
    tasks = [asyncio.create_task(polite(), name="polite"), asyncio.create_task(deaf(), name="deaf")]
    await asyncio.sleep(0)
    left = await settle(tasks, 0.2)
    assert [t.get_name() for t in left] == ["deaf"] and tasks[0].cancelled()
    assert describe(left).startswith("deaf in deaf at tests/bot/runtime/test_stop_bounds.py:")
    quit_now.set()
    tasks[1].cancel()
    await asyncio.wait(tasks)
