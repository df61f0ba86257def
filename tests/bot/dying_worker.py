"""A worker process for tests: `python -m tests.bot.dying_worker <redis url> die|record`.

`die`: handling any entry kills this process with SIGKILL, as the kernel's OOM killer would.
`record`: handled entries are pushed to the list `test:handled`, entries the worker gave up
on to `test:told`; SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import redis.asyncio as aioredis

from adapters.base import Inbound
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks, Holding
from bot.runtime.worker import Worker

KEYS = Keys()


async def main(url: str, mode: str) -> None:
    redis = aioredis.Redis.from_url(url)

    async def handle(entry: str, event: Inbound, holding: Holding) -> None:
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        await redis.rpush("test:handled", entry)

    async def told(entry: str, event: Inbound) -> None:
        await redis.rpush("test:told", entry)

    locks = ConversationLocks(redis, KEYS, lease=1.0, ttl=3600)
    worker = Worker(
        redis, KEYS, locks, handle, on_error=told, reclaim_idle=0.5, block=0.1, max_attempts=3
    )
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    task = asyncio.create_task(worker.run())
    await stopping.wait()
    worker.stop()
    await task
    await worker.drain(5, 5)
    await worker.leave()
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
