"""Starting due schedule slots: each slot becomes one ordinary inbox entry, exactly once.

Schedules are due work (`bot/runtime/due.py`): every worker runs this loop, claims the
schedules whose slot is due under a lease (the due set's score is the slot), and for each
computes the next slot after now and runs one script that, only under its own claim, moves
the schedule to the next slot, sets the dedup mark `schedule:<id>:<slot>` and appends the
objective to the inbox (all keys under the inbox's hash tag) — so of several workers (or
gateways) only one starts a slot, and a repeat of a started slot is dropped by its mark.
Slots missed while nobody ran collapse into one run, marked late. A record that cannot be
read (or whose times cannot be worked out) is skipped and counted, and left due at its slot
for an operator; the other schedules' slots still start. From the inbox on, a scheduled
objective is handled like any message: durable, reclaimed from a dead worker, answered once
through the outbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from redis.commands.core import AsyncScript

from adapters.base import Actor, ConversationKey, InboundMessage
from agent.recurrence import RecurrenceError
from bot.features.schedules.store import Schedule, ScheduleStore
from bot.ops import metrics
from bot.ops.health import Health
from bot.runtime.due import DueKeys, DueLoop
from bot.runtime.inbox import STREAM_MAXLEN, encode
from bot.runtime.keys import schedule_event, schedule_slot_of

log = logging.getLogger(__name__)

# KEYS: claimed, due, dedup mark, inbox. ARGV: id, lease end, next slot, mark ttl (ms),
# maxlen, event, queued_at. Returns 1 when the slot was started here, 0 when the claim was
# no longer this pass's (its lease ran out and another clock took it, or it was paused).
_START = """
local score = redis.call('zscore', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('zadd', KEYS[2], ARGV[3], ARGV[1])
if not redis.call('set', KEYS[3], '1', 'NX', 'PX', ARGV[4]) then return 0 end
redis.call('xadd', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'event', ARGV[6], 'queued_at', ARGV[7])
return 1
"""
BATCH = 500  # due schedules claimed per round trip
CLAIM_FOR = 60.0  # seconds a clock holds the slots it claimed before another may start them
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


@dataclass(eq=False)
class ScheduleClock(DueLoop[Schedule]):
    store: ScheduleStore
    _: KW_ONLY
    dedup_ttl: float
    # epoch seconds: when slots fall due (a test moves its own on)
    clock: Callable[[], float] = time.time
    _start: AsyncScript = field(init=False, repr=False)

    def __post_init__(self, health: Health | None) -> None:
        keys = self.keys
        due = DueKeys(due=keys.schedules_due, claimed=keys.schedules_claimed, record=keys.schedule)
        self.due_work(
            due,
            Schedule,
            kind="schedule",
            loop="schedules",
            lease=CLAIM_FOR,
            health=health,
            batch=BATCH,
            keep_unreadable=True,
        )
        self._start = self.redis.register_script(_START)

    async def due_pass(self) -> None:
        while await self.start_due() >= BATCH:
            pass  # a full batch: more may be due
        for state, count in (await self.store.counts()).items():
            metrics.SCHEDULES.labels(state).set(count)

    async def start_due(self, now: float | None = None) -> int:
        """Start the slots due by `now`; returns how many due schedules were claimed."""
        now = self.clock() if now is None else now
        due = await self.work.claims(now)
        queued_at = f"{time.time():.6f}"
        lateness: list[float] = []  # per script queued
        ended: list[Schedule] = []
        async with self.redis.pipeline(transaction=False) as pipe:
            for claim in due:
                found, slot = claim.record, int(claim.due)
                try:
                    upcoming = found.next_after(max(now, slot))
                except RecurrenceError:  # it never runs again: paused, said in /schedules
                    ended.append(found)
                    continue
                except Exception as exc:  # one unusable record must not hold up the others
                    await self.work.unreadable(claim.member, claim.due, exc)
                    continue
                event = objective_event(found, slot, late=now - slot > late_after(found))
                lateness.append(now - slot)
                await self._start(
                    keys=[
                        self.keys.schedules_claimed,
                        self.keys.schedules_due,
                        self.keys.dedup(event.event_id),
                        self.keys.inbox,
                    ],
                    args=[
                        claim.member,
                        claim.lease_end,
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
        won = [late for late, ok in zip(lateness, results, strict=True) if ok]
        for late in won:
            metrics.SCHEDULE_LATENESS.observe(max(late, 0.0))
            metrics.SCHEDULE_RUNS.labels("started").inc()
        if won:
            log.info("started %d scheduled objective(s)", len(won))
        return len(due)
