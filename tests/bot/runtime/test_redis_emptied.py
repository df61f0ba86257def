"""Redis comes back empty (restarted without persistence): the inbox stream and the workers'
consumer group are gone. The worker creates the group again, says so once, and keeps
reading. A private Redis Stack server is stopped, its data removed, and started again."""

from __future__ import annotations

import logging
import shutil

import pytest
import redis.asyncio as aioredis

from adapters.base import HandoverFailed
from bot.ops.health import Health
from bot.runtime.keys import Keys
from bot.runtime.reclaimer import Reclaimer
from bot.runtime.worker import GROUP
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import running
from tests.bot.recording import dm, message
from tests.bot.runtime.test_faults import echo
from tests.helpers import until
from tests.private_redis import PrivateRedis

KEYS = Keys()


@pytest.mark.network
async def test_redis_back_empty_the_worker_creates_its_group_again_and_keeps_reading(
    stoppable: tuple[PrivateRedis, aioredis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot")
    chat = dm()
    model = ScriptedModel([echo] * 10)
    health = Health()
    server, client = stoppable
    async with running(client, model, health=health) as harness:
        await harness.submit(message(chat, "before"))

        async def answered(count: int) -> bool:
            return len(harness.adapter.texts(chat)) >= count

        await until(lambda: answered(1))
        await harness.settle()

        await server.down()
        for data in (server.folder / "redis").iterdir():  # no persistence: nothing kept
            if data.name not in ("parley.lock", "redis.log"):
                shutil.rmtree(data) if data.is_dir() else data.unlink()
        await server.up()
        assert not await client.exists(KEYS.session(chat.id))  # it came back empty

        async def submitted() -> bool:
            try:
                return await harness.submit(message(chat, "after"))
            except HandoverFailed:
                return False  # the platform would deliver it again

        await until(submitted)
        await until(lambda: answered(2))
        await harness.settle()

        async def all_ok() -> bool:
            return all(loop.state == "ok" for loop in health.loops.values())

        await until(all_ok)
        groups = await client.xinfo_groups(KEYS.inbox)
        assert [g["name"] for g in groups] == [GROUP.encode()]

    assert harness.adapter.texts(chat) == ["re: before", "re: after"]
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("bot.")]
    gone = [line for line in lines if "consumer group is gone" in line]
    assert len(gone) == 1, lines
    assert not [line for line in lines if "pass failed" in line or "ResponseError" in line], lines
    for loop in health.loops:
        degraded = [line for line in lines if line.startswith(f"{loop} degraded")]
        recovered = [line for line in lines if line.startswith(f"{loop} recovered after")]
        assert len(degraded) == len(recovered) <= 1, (loop, lines)


async def test_a_worker_stopped_before_the_group_exists_leaves_cleanly(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A SIGTERM right after start can come before the first read made the group; `parley
    run` must still stop with exit 0 (it raised NOGROUP and exited 1)."""
    caplog.set_level(logging.INFO, logger="bot")

    async def accept(_entries: object) -> None:
        raise AssertionError("nothing to reclaim")

    heartbeat = Health().register("reclaimer", every=1.0)
    reclaimer = Reclaimer(redis, KEYS, "w-early", accept, heartbeat, reclaim_idle=30.0)
    await reclaimer.leave()
    assert "w-early stopped before joining the consumer group" in caplog.text
    assert not await redis.exists(KEYS.inbox)  # leaving creates nothing
