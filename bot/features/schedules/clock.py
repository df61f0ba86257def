"""Starting due schedule slots: each slot becomes one ordinary inbox entry, exactly once.

Every worker runs this loop. For each schedule whose slot is due it computes the next slot
after now and runs one script that, only if the schedule still waits on that same slot,
moves it to the next one, sets the dedup mark `schedule:<id>:<slot>` and appends the
objective to the inbox — so of several workers (or gateways) only one starts a slot, and a
repeat of a started slot is dropped by its mark. Slots missed while nobody ran collapse
into one run, marked late. From the inbox on, a scheduled objective is handled like any
message: durable, reclaimed from a dead worker, answered once through the outbox.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

import redis.asyncio as aioredis

from adapters.base import Actor, ConversationKey, InboundMessage
from agent.recurrence import RecurrenceError
from bot.features.schedules.store import Schedule, ScheduleStore
from bot.ops import metrics
from bot.ops.health import Health, repeat
from bot.runtime.inbox import STREAM_MAXLEN, encode
from bot.runtime.keys import Keys, schedule_event, schedule_slot_of

log = logging.getLogger(__name__)

# KEYS: due set, dedup mark, inbox. ARGV: id, slot, next slot, mark ttl (ms), maxlen, event,
# queued_at. Returns 1 when the slot was started here, 0 when someone else moved it on.
_START = """
local score = redis.call('zscore', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[3], ARGV[1])
if not redis.call('set', KEYS[2], '1', 'NX', 'PX', ARGV[4]) then return 0 end
redis.call('xadd', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'event', ARGV[6], 'queued_at', ARGV[7])
return 1
"""
# KEYS: due set. ARGV: id, slot. Drops a schedule whose record is gone, if still at that slot.
_DROP = """
local score = redis.call('zscore', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then redis.call('zrem', KEYS[1], ARGV[1]) end
return 0
"""
BATCH = 500  # due schedules read per round trip
NEVER_AGAIN = "its times never come again"


def slot_of(event: InboundMessage) -> tuple[str, int]:
    """The schedule id and slot of a scheduled objective."""
    return schedule_slot_of(event.event_id)


def late_after(found: Schedule) -> float:
    """Seconds after its slot a run counts as late: half its period, from 3 s to 30 s."""
    period = found.recurrence.every or 60
    return min(30.0, max(3.0, period / 2))


def objective_event(found: Schedule, slot: int, *, late: bool) -> InboundMessage:
    conversation = ConversationKey.parse(found.conversation_id)
    return InboundMessage(
        event_id=schedule_event(found.id, slot),
        conversation=conversation,
        actor=Actor(
            platform=conversation.platform,
            user_id=found.owner_id,
            name=found.owner_name,
            team_id=found.team_id,
            enterprise_id=found.org_id,
        ),
        text=found.objective,
        is_direct=found.is_direct,
        kind="scheduled",
        args="late" if late else "",
    )


class ScheduleClock:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        store: ScheduleStore,
        *,
        dedup_ttl: float,
        poll: float = 1.0,
        health: Health | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.store = store
        self.dedup_ttl = dedup_ttl
        self.poll = poll
        self.clock = clock  # epoch seconds: when slots fall due (a test moves its own on)
        self._start = redis.register_script(_START)
        self._drop = redis.register_script(_DROP)
        self.heartbeat = (health or Health()).register("schedules", every=poll + 30.0)

    async def run(self, stop: asyncio.Event) -> None:
        async def one_pass() -> None:
            while await self.start_due() >= BATCH and not stop.is_set():
                pass  # a full batch: more may be due
            for state, count in (await self.store.counts()).items():
                metrics.SCHEDULES.labels(state).set(count)

        await repeat(stop, self.heartbeat, one_pass, self.poll)

    async def start_due(self, now: float | None = None) -> int:
        """Start the slots due by `now`; returns how many due schedules were looked at."""
        now = self.clock() if now is None else now
        # Several clocks start a large burst side by side: each begins at a random place in
        # what is due, so they rarely compute the same slots only for one to lose them all.
        waiting = await self.redis.zcount(self.keys.schedules_due, "-inf", now)
        if not waiting:
            return 0
        offset = random.randrange(waiting - BATCH + 1) if waiting > BATCH else 0
        due: list[tuple[bytes, float]] = await self.redis.zrangebyscore(
            self.keys.schedules_due, "-inf", now, start=offset, num=BATCH, withscores=True
        )  # type: ignore[assignment]
        if not due:
            return 0
        ids = [member.decode() for member, _ in due]
        raws = await self.redis.mget([self.keys.schedule(i) for i in ids])
        queued_at = f"{time.time():.6f}"
        lateness: list[float | None] = []  # per script queued; None for a drop
        ended: list[Schedule] = []
        async with self.redis.pipeline(transaction=False) as pipe:
            for schedule_id, (_, score), raw in zip(ids, due, raws, strict=True):
                slot = int(score)
                if raw is None:
                    await self._drop(
                        keys=[self.keys.schedules_due], args=[schedule_id, slot], client=pipe
                    )
                    lateness.append(None)
                    continue
                try:
                    found = Schedule.decode(raw)
                    upcoming = found.next_after(max(now, slot))
                except RecurrenceError:  # it never runs again: paused, said in /schedules
                    ended.append(Schedule.decode(raw))
                    continue
                except Exception:  # one unreadable record must not hold up the others
                    log.exception("schedule %s cannot be read; it stays where it is", schedule_id)
                    continue
                event = objective_event(found, slot, late=now - slot > late_after(found))
                lateness.append(now - slot)
                await self._start(
                    keys=[
                        self.keys.schedules_due,
                        self.keys.dedup(event.event_id),
                        self.keys.inbox,
                    ],
                    args=[
                        schedule_id,
                        slot,
                        upcoming,
                        int(self.dedup_ttl * 1000),
                        STREAM_MAXLEN,
                        encode(event),
                        queued_at,
                    ],
                    client=pipe,
                )
            results = await pipe.execute()
        for found in ended:
            log.warning("schedule %s never runs again (%s); paused", found.id, found.when)
            await self.store.pause(found, note=NEVER_AGAIN)
        won = [late for late, ok in zip(lateness, results, strict=True) if ok and late is not None]
        for late in won:
            metrics.SCHEDULE_LATENESS.observe(max(late, 0.0))
            metrics.SCHEDULE_RUNS.labels("started").inc()
        if won:
            log.info("started %d scheduled objective(s)", len(won))
        return len(due)
