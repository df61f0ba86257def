"""A poison entry that kills its worker outright (SIGKILL, as the OOM killer does) is counted
as a try each time, and dead-lettered after PARLEY_MAX_ATTEMPTS instead of killing every
worker that takes it up (real worker processes on a real Redis)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

import pytest
import redis.asyncio as aioredis

from bot.runtime.inbox import encode
from bot.runtime.keys import Keys
from bot.runtime.worker import GROUP
from tests.bot.recording import dm, message

pytestmark = pytest.mark.process
KEYS = Keys()


async def worker(redis_url: str, mode: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.bot.dying_worker", redis_url, mode
    )


async def test_a_worker_killed_by_an_entry_counts_a_try_and_the_entry_is_dead_lettered(
    redis: aioredis.Redis, redis_url: str
) -> None:
    chat = dm()
    await redis.xgroup_create(KEYS.inbox, GROUP, id="0", mkstream=True)
    poison = (await redis.xadd(KEYS.inbox, {"event": encode(message(chat, "x"))})).decode()
    # Three workers take it up in turn (the first reads it, the others reclaim it) and die.
    for _ in range(3):
        child = await worker(redis_url, "die")
        async with asyncio.timeout(60):
            assert await child.wait() == -signal.SIGKILL
    assert not await redis.xlen(KEYS.dead_letters)
    # The fourth does not try it again: it is dead-lettered and its user told.
    after = (await redis.xadd(KEYS.inbox, {"event": encode(message(chat, "y"))})).decode()
    survivor = await worker(redis_url, "record")
    try:
        deadline = time.monotonic() + 60
        while await redis.llen("test:handled") < 1:
            assert survivor.returncode is None, "the fourth worker died too"
            assert time.monotonic() < deadline, "the conversation never moved on"
            await asyncio.sleep(0.1)
    finally:
        survivor.terminate()
        async with asyncio.timeout(30):
            await survivor.wait()
    assert await redis.lrange("test:handled", 0, -1) == [after.encode()]
    assert await redis.lrange("test:told", 0, -1) == [poison.encode()]
    [(_, letter)] = await redis.xrange(KEYS.dead_letters)
    assert letter[b"entry"] == poison.encode() and letter[b"reason"] == b"failed"
    assert letter[b"error"] == b"CutShort" and letter[b"attempts"] == b"3"
    assert not await redis.hlen(KEYS.attempts(chat.id))
