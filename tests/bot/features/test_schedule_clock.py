"""The clock that starts due slots, on a real Redis with a fake `now`: daylight-saving days in
a fixed zone, many clocks racing, and Redis going away and coming back under the loop."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import redis.asyncio as aioredis

from agent.protocols import RunContext
from agent.recurrence import Recurrence, RecurrenceError, check, zone_of
from bot.conversation.running import run_context
from bot.features.schedules.clock import ScheduleClock
from bot.features.schedules.store import Schedule, ScheduleStore
from bot.ops import metrics
from bot.ops.health import Health
from bot.runtime.inbox import decode
from bot.runtime.keys import Keys
from tests.helpers import until
from tests.private_redis import private_redis

BERLIN = ZoneInfo("Europe/Berlin")
CONTEXT = RunContext(
    conversation_id="telegram:-:42:-", platform="telegram", user_id="42", chat_id="42"
)


def chat(n: int) -> RunContext:
    return RunContext(
        conversation_id=f"telegram:-:{n}:-", platform="telegram", user_id=str(n), chat_id=str(n)
    )


async def started_slots(redis: aioredis.Redis, keys: Keys) -> list[datetime]:
    entries = await redis.xrange(keys.inbox)
    slots = [int(decode(fields[b"event"]).event_id.rsplit(":", 1)[1]) for _, fields in entries]
    return [datetime.fromtimestamp(slot, BERLIN) for slot in slots]


async def walk(
    clock: ScheduleClock, store: ScheduleStore, schedule_id: str, until: datetime
) -> None:
    """Start every slot in turn, as a clock that is always on time would."""
    while True:
        slot = await store.redis.zscore(store.keys.schedules_due, schedule_id)
        assert slot is not None
        if slot > until.timestamp():
            return
        await clock.start_due(now=slot)


async def test_daylight_saving_days_neither_skip_nor_double_a_slot(redis: aioredis.Redis) -> None:
    keys = Keys()
    store = ScheduleStore(redis, keys)
    clock = ScheduleClock(redis, keys, store, dedup_ttl=600)
    made = await store.create_schedule("30 2 * * *", "morning", "Europe/Berlin", (), CONTEXT)
    spring = datetime(2027, 3, 26, 12, tzinfo=BERLIN)
    first = Recurrence.parse("30 2 * * *").next_after(spring.timestamp(), BERLIN, 0)
    await redis.zadd(keys.schedules_due, {made.id: int(first)})
    await walk(clock, store, made.id, datetime(2027, 3, 31, tzinfo=BERLIN))
    spring_runs = await started_slots(redis, keys)
    # 2027-03-28 has no 02:30 in Berlin: that day's run is at 03:00, once.
    assert [d.strftime("%m-%d %H:%M %Z") for d in spring_runs] == [
        "03-27 02:30 CET",
        "03-28 03:00 CEST",
        "03-29 02:30 CEST",
        "03-30 02:30 CEST",
    ]

    await redis.delete(keys.inbox)
    autumn = datetime(2027, 10, 29, 12, tzinfo=BERLIN)
    first = Recurrence.parse("30 2 * * *").next_after(autumn.timestamp(), BERLIN, 0)
    await redis.zadd(keys.schedules_due, {made.id: int(first)})
    await walk(clock, store, made.id, datetime(2027, 11, 2, tzinfo=BERLIN))
    autumn_runs = await started_slots(redis, keys)
    # 2027-10-31 has 02:30 twice in Berlin: it runs once.
    assert [d.strftime("%m-%d %H:%M") for d in autumn_runs] == [
        "10-30 02:30",
        "10-31 02:30",
        "11-01 02:30",
    ]


def test_intervals_count_real_seconds_through_a_clock_change() -> None:
    every = Recurrence.parse("every 1 hours")
    start = datetime(2027, 10, 31, 0, 30, tzinfo=BERLIN).timestamp()
    slots = every.upcoming(start, BERLIN, start, 4)
    assert [b - a for a, b in zip([start, *slots], slots, strict=False)] == [3600.0] * 4


def test_when_is_checked_and_the_refusal_names_the_minimum() -> None:
    assert Recurrence.parse("Every 5 Minutes").every == 300
    assert Recurrence.parse("0 9 * * 1-5").cron == "0 9 * * 1-5"
    for bad in ("tomorrow", "61 * * * *", "every 0 seconds", "* * * *"):
        with pytest.raises(RecurrenceError):
            check(bad, "UTC", 60, 0)
    with pytest.raises(RecurrenceError, match="minimum interval is 3600 seconds"):
        check("*/30 * * * *", "UTC", 3600, 0)
    with pytest.raises(RecurrenceError, match="Unknown time zone"):
        check("0 9 * * *", "Mars/Olympus", 60, 0)
    assert zone_of("Europe/Berlin") == BERLIN


async def test_many_clocks_racing_start_each_due_slot_once(redis: aioredis.Redis) -> None:
    keys = Keys()
    store = ScheduleStore(redis, keys)
    clocks = [ScheduleClock(redis, keys, store, dedup_ttl=600) for _ in range(4)]
    made = [
        await store.create_schedule("every 1 minutes", f"job {n}", "UTC", (), chat(n))
        for n in range(300)
    ]
    slot = max(m.next_run or 0 for m in made)
    await asyncio.gather(*(clock.start_due(now=slot) for clock in clocks))
    await asyncio.gather(*(clock.start_due(now=slot + 1) for clock in clocks))
    assert await redis.xlen(keys.inbox) == 300
    ids = {decode(f[b"event"]).event_id for _, f in await redis.xrange(keys.inbox)}
    assert len(ids) == 300


@pytest.mark.network
async def test_the_loop_rides_out_redis_going_away(tmp_path: Path) -> None:
    async with private_redis(tmp_path) as server:
        redis = server.client()
        keys = Keys()
        store = ScheduleStore(redis, keys, min_interval=1)
        health = Health()
        skew = [0.0]  # the clock is moved on instead of waited out
        clock = ScheduleClock(
            redis,
            keys,
            store,
            dedup_ttl=600,
            poll=0.05,
            health=health,
            clock=lambda: time.time() + skew[0],
        )
        stop = asyncio.Event()
        loop = asyncio.create_task(clock.run(stop))
        try:
            made = await store.create_schedule("every 1 seconds", "tick", "UTC", (), CONTEXT)
            skew[0] += 1.0
            await until(lambda: _inbox_holds(redis, keys, 1))
            started = await redis.xlen(keys.inbox)
            await server.down()
            await until(lambda: clock.heartbeat.state == "degraded")
            skew[0] += 2.0  # slots fall due while Redis is away
            ready, detail = await health.readiness()
            assert ready and "schedules degraded: Redis unreachable" in detail  # /readyz
            await server.up()
            await until(lambda: clock.heartbeat.state == "ok")
            await until(lambda: _inbox_holds(redis, keys, started + 1))  # caught up
            assert "schedules ok" in (await health.readiness())[1]
            slots = [
                int(decode(f[b"event"]).event_id.rsplit(":", 1)[1])
                for _, f in await redis.xrange(keys.inbox)
            ]
            assert len(slots) == len(set(slots))  # no slot twice
            assert slots == sorted(slots)
            assert await redis.zscore(keys.schedules_due, made.id) is not None
        finally:
            stop.set()
            await loop
            await redis.aclose()


async def _inbox_holds(redis: aioredis.Redis, keys: Keys, count: int) -> bool:
    return int(await redis.xlen(keys.inbox)) >= count


async def test_an_unreadable_record_holds_up_no_other_schedule(redis: aioredis.Redis) -> None:
    keys = Keys()
    store = ScheduleStore(redis, keys)
    clock = ScheduleClock(redis, keys, store, dedup_ttl=600)
    good = await store.create_schedule("every 1 minutes", "fine", "UTC", (), CONTEXT)
    slot = good.next_run or 0
    await redis.set(keys.schedule("broken"), '{"id": "broken", "when": "every 1 minutes"}')
    await redis.zadd(keys.schedules_due, {"broken": slot})
    await clock.start_due(now=slot)
    [(_, fields)] = await redis.xrange(keys.inbox)
    assert decode(fields[b"event"]).event_id == f"schedule:{good.id}:{int(slot)}"
    assert await redis.zscore(keys.schedules_due, "broken") == slot  # left for an operator


async def test_a_slot_keeps_its_owners_organisation_for_team_memories(
    redis: aioredis.Redis,
) -> None:
    """A schedule made in a workspace (T111) of an Enterprise Grid organisation (E111): its
    slots run as a person of that organisation, so with team memories shared org-wide they
    read and write the organisation's; a record from before the field reads as none."""
    keys = Keys()
    store = ScheduleStore(redis, keys)
    clock = ScheduleClock(redis, keys, store, dedup_ttl=600)
    ana = RunContext(
        conversation_id="slack:T111:C111:-",
        platform="slack",
        user_id="W222",
        chat_id="C111",
        team_id="T111",
        org_id="E111",
        is_direct=False,
    )
    made = await store.create_schedule("0 9 * * *", "the team's news", "UTC", (), ana)
    slot = await redis.zscore(keys.schedules_due, made.id)
    assert slot is not None
    await clock.start_due(now=slot)
    ((_, fields),) = await redis.xrange(keys.inbox)
    event = decode(fields[b"event"])
    assert (event.actor.team_id, event.actor.enterprise_id) == ("T111", "E111")
    context = run_context(event, org_team=True)
    assert context.write_scope("team") == "team:slack:E111"
    assert "team:slack:T111" in context.readable_scopes()
    found = await store.get(made.id)
    assert found is not None
    old = json.loads(found.encode())
    del old["org_id"]
    assert Schedule.decode(json.dumps(old)).org_id is None


async def test_unreadable_records_are_skipped_and_counted_and_the_other_slots_start(
    redis: aioredis.Redis,
) -> None:
    """Schedules are due work: a record that is not JSON, or JSON that is no schedule, is
    skipped and counted once (however many passes meet it) and stays due at its slot for an
    operator, while every other schedule due in the same claim starts its slot."""
    keys = Keys()
    store = ScheduleStore(redis, keys)
    clock = ScheduleClock(redis, keys, store, dedup_ttl=600)
    made = [
        await store.create_schedule("every 1 minutes", f"fine {n}", "UTC", (), chat(n))
        for n in range(3)
    ]
    slot = max(found.next_run or 0 for found in made)
    await redis.set(keys.schedule("garbled"), b"\xff{not json")
    await redis.set(keys.schedule("wrong"), json.dumps({"id": "wrong", "when": 5}))
    await redis.zadd(keys.schedules_due, {"garbled": slot - 1, "wrong": slot - 2})
    counted = metrics.DUE_UNREADABLE.labels("schedule")._value.get()

    assert await clock.start_due(now=slot) == 3
    started = [decode(fields[b"event"]).event_id for _, fields in await redis.xrange(keys.inbox)]
    assert sorted(started) == sorted(f"schedule:{f.id}:{int(f.next_run or 0)}" for f in made)
    assert metrics.DUE_UNREADABLE.labels("schedule")._value.get() == counted + 2
    assert await redis.zscore(keys.schedules_due, "garbled") == slot - 1
    assert await redis.zscore(keys.schedules_due, "wrong") == slot - 2
    assert await redis.zcard(keys.schedules_claimed) == 0

    await clock.start_due(now=slot + 1)  # met again: skipped, not counted twice
    assert metrics.DUE_UNREADABLE.labels("schedule")._value.get() == counted + 2
    assert await redis.xlen(keys.inbox) == 3
    await clock.due_pass()  # the loop's own pass does not fail on them either
    assert await redis.zscore(keys.schedules_due, "garbled") == slot - 1
