"""Schedules: 10,000 slots due in the same minute, started by two workers, each once; and the
service's objectives/s with 10,000 schedules in place, side by side with none.

Real `parley` processes on a throwaway Redis Stack; Telegram (webhook mode) and Anthropic
played by local fakes that answer at once, as in bench_service. First a `parley run` is
measured the way bench_service measures capacity (20 conversations back to back), in turns
without schedules and with 10,000 stored (their slots later in the day: what every worker's
schedule loop then costs is its once-a-second look at the due set). Then 10,000 schedules
are made due at the same minute boundary and two `parley worker` processes start them: each
slot must become exactly one inbox entry (its dedup mark names the slot), all within that
minute. The workers then run those objectives too; the bench stops once every slot started.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

import redis.asyncio as aioredis

from bench.bench_service import free_port, measure, service_env, start, wait_http
from bench.support import bench_line, throwaway_redis
from bot.features.schedules.store import Schedule
from bot.runtime.inbox import decode
from bot.runtime.keys import Keys
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

SCHEDULES = 10_000
# Side by side in the order without, with, with, without, so that a machine getting busier
# or the service warming up over the minutes weighs on both the same.
ORDER = ("without", "with", "with", "without")
CONCURRENCY = 20  # conversations back to back, 20 messages each
START_WITHIN = 60.0  # seconds after the slot by which every schedule must have started


async def make_schedules(redis: aioredis.Redis, keys: Keys, slot: int, when: str) -> None:
    """Schedules in 10,000 Telegram chats, all waiting on `slot` (written as the store would)."""
    now = time.time()
    for first in range(0, SCHEDULES, 1000):
        async with redis.pipeline(transaction=False) as pipe:
            for n in range(first, first + 1000):
                chat = 500_000 + n
                item = Schedule(
                    id=f"b{n:07d}",
                    when=when,
                    objective=f"post the daily numbers ({n})",
                    timezone="UTC",
                    owner_id=str(chat),
                    owner_name=f"user {n}",
                    platform="telegram",
                    conversation_id=f"telegram:-:{chat}:-",
                    anchor=int(now),
                )
                pipe.set(keys.schedule(item.id), item.encode())
                pipe.sadd(keys.schedules_all, item.id)
                pipe.sadd(keys.schedules_in(item.conversation_id), item.id)
                pipe.zadd(keys.schedules_due, {item.id: slot})
            await pipe.execute()


async def drop_schedules(redis: aioredis.Redis, keys: Keys) -> None:
    ids = [i.decode() for i in await redis.smembers(keys.schedules_all)]
    for first in range(0, len(ids), 1000):
        chunk = ids[first : first + 1000]
        await redis.delete(*(keys.schedule(i) for i in chunk))
    await redis.delete(
        keys.schedules_all, keys.schedules_due, keys.schedules_claimed, keys.schedules_paused
    )


async def started_slots(redis: aioredis.Redis, keys: Keys, slot: int) -> tuple[list[str], float]:
    """The inbox entries started for `slot`, and the latest time one was queued."""
    ids: list[str] = []
    latest = 0.0
    cursor = "-"
    while True:
        entries = await redis.xrange(keys.inbox, min=cursor, count=5000)
        if not entries:
            break
        for _, fields in entries:
            event_id = decode(fields[b"event"]).event_id
            if event_id.startswith("schedule:") and event_id.endswith(f":{slot}"):
                ids.append(event_id)
                latest = max(latest, float(fields[b"queued_at"]))
        last = entries[-1][0].decode()
        ms, seq = last.split("-")
        cursor = f"{ms}-{int(seq) + 1}"
    return ids, latest


async def main() -> None:
    figures: dict[str, Any] = {}
    keys = Keys()
    with throwaway_redis() as redis_url, tempfile.TemporaryDirectory() as logs:
        redis = aioredis.Redis.from_url(redis_url)
        async with FakeTelegram() as telegram, FakeAnthropic() as hosted:
            hosted.responder = lambda body: fa.text("ok")
            port = free_port()
            env = service_env(redis_url, telegram, hosted, port)
            url = f"http://127.0.0.1:{port}/telegram/webhook"

            # --- the service's rate, without and with 10,000 schedules ---------------------
            metrics_port = free_port()
            service = await start(
                "run",
                {**env, "PARLEY_HTTP_PORT": str(port), "PARLEY_METRICS_PORT": str(metrics_port)},
                logs,
            )
            rates: dict[str, list[float]] = {"without": [], "with": []}
            base = 10_000
            try:
                await wait_http(metrics_port)
                await asyncio.sleep(2)
                await measure(telegram, url, 5, base)  # warm-up
                base += 100
                later = int(time.time()) + 6 * 3600
                for label in ORDER:
                    if label == "with":
                        await make_schedules(redis, keys, later, "0 3 * * *")
                    latencies, wall = await measure(telegram, url, CONCURRENCY, base)
                    base += 100
                    rates[label].append(len(latencies) / wall)
                    print(
                        f"service, {label} {SCHEDULES:,} schedules: {rates[label][-1]:.0f} objectives/s"
                    )
                    if label == "with":
                        await drop_schedules(redis, keys)
            finally:
                service.terminate()
                await service.wait()
            without = statistics.median(rates["without"])
            loaded = statistics.median(rates["with"])
            figures["slowdown_pct"] = (1 - loaded / without) * 100

            # --- 10,000 slots in one minute, two workers ------------------------------------
            slot = (int(time.time()) // 60 + 1) * 60
            if slot - time.time() < 25:
                slot += 60  # time for the workers to start before the slot
            await make_schedules(redis, keys, slot, "* * * * *")
            workers = []
            for _ in range(2):
                metrics = free_port()
                workers.append(
                    (
                        await start(
                            "worker",
                            {
                                **env,
                                "PARLEY_HTTP_PORT": str(free_port()),
                                "PARLEY_METRICS_PORT": str(metrics),
                            },
                            logs,
                        ),
                        metrics,
                    )
                )
            try:
                for _, metrics in workers:
                    await wait_http(metrics)
                print(
                    f"{SCHEDULES:,} schedules due at {time.strftime('%H:%M:%S', time.gmtime(slot))} UTC"
                )
                await asyncio.sleep(max(0.0, slot - time.time()))
                deadline = slot + START_WITHIN + 30
                ids: list[str] = []
                latest = 0.0
                while time.time() < deadline:
                    # due, or claimed by a clock that is starting it
                    waiting = await redis.zcount(keys.schedules_due, "-inf", slot)
                    waiting += await redis.zcard(keys.schedules_claimed)
                    if waiting == 0:
                        break
                    await asyncio.sleep(0.5)
                ids, latest = await started_slots(redis, keys, slot)
            finally:
                for process, _ in workers:
                    process.terminate()
                for process, _ in workers:
                    await process.wait()
            figures["started"] = len(ids)
            figures["distinct"] = len(set(ids))
            figures["last_start_s"] = latest - slot if ids else float("inf")
        await redis.aclose()
    print(
        f"started {figures['started']:,} of {SCHEDULES:,} slots ({figures['distinct']:,} distinct), "
        f"the last {figures['last_start_s']:.1f} s after the slot"
    )
    print(f"service objectives/s: {without:.0f} without schedules, {loaded:.0f} with {SCHEDULES:,}")
    print(f"targets: all {SCHEDULES:,} started once within {START_WITHIN:.0f} s; slowdown <= 10%")
    bench_line(
        "schedules",
        ok=figures["started"] == SCHEDULES
        and figures["distinct"] == SCHEDULES
        and figures["last_start_s"] <= START_WITHIN
        and figures["slowdown_pct"] <= 10,
        started=figures["started"],
        distinct=figures["distinct"],
        last_start_s=f"{figures['last_start_s']:.1f}",
        objectives_per_s_without=f"{without:.0f}",
        objectives_per_s_with=f"{loaded:.0f}",
        slowdown_pct=f"{figures['slowdown_pct']:.1f}",
    )


if __name__ == "__main__":
    asyncio.run(main())
