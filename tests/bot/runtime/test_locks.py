"""The conversation lock's round trips carry what its holder needs next: taking it puts new
entries on the backlog and reads the oldest one and the session; storing the session takes
the handled entry off and reads the next; releasing it says how many still wait, or keeps
the lock while some do. Each says whether the entry it names is untried."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.runtime.holding import Holding, PendingWrites
from bot.runtime.keys import Keys, backlog_member, entry_of
from bot.runtime.locks import ConversationLocks
from bot.runtime.sessions import Session, SessionStore
from tests.helpers import until

KEYS = Keys()
CHAT = "telegram:-:5:-"


def locks_on(redis: aioredis.Redis) -> ConversationLocks:
    return ConversationLocks(redis, KEYS, lease=5, ttl=60)


async def test_taking_the_lock_queues_entries_and_reads_the_oldest_and_the_session(
    redis: aioredis.Redis,
) -> None:
    await redis.set(KEYS.session(CHAT), Session(last_entry="1-0").model_dump_json())
    members = [backlog_member("7-1"), backlog_member("7-0")]
    lease = await locks_on(redis).try_acquire(CHAT, members)
    assert lease is not None
    assert lease.cursor.head is not None and entry_of(lease.cursor.head) == "7-0"
    assert lease.cursor.untried == set()  # not first deliveries: someone may have tried them
    assert lease.stored is not None
    assert Session.model_validate_json(lease.stored).last_entry == "1-0"
    assert await redis.zrange(KEYS.backlog(CHAT), 0, -1) == [m.encode() for m in sorted(members)]
    assert 0 < await redis.pttl(KEYS.backlog(CHAT)) <= 60_000


async def test_entries_go_on_the_backlog_even_while_someone_else_holds_the_lock(
    redis: aioredis.Redis,
) -> None:
    locks = locks_on(redis)
    holder = await locks.try_acquire(CHAT, [backlog_member("3-0")])
    assert holder is not None and holder.stored is None
    assert await locks.try_acquire(CHAT, [backlog_member("4-0")]) is None
    assert await redis.zcard(KEYS.backlog(CHAT)) == 2
    assert await locks.release(holder) == 2  # both wait: the holder knows to drain again
    assert not holder.cursor.kept and not await redis.exists(KEYS.lock(CHAT))


async def test_an_entry_first_delivered_to_whoever_tried_the_lock_is_untried_for_the_holder(
    redis: aioredis.Redis,
) -> None:
    locks, sessions = locks_on(redis), SessionStore(redis, KEYS, ttl=60)
    holder = await locks.try_acquire(CHAT, first=[backlog_member("3-0")])
    assert holder is not None and holder.cursor.untried == {"3-0"}
    # Another worker's first delivery, put on the backlog as it failed to take the lock;
    # a member already on the backlog is not untried, whatever its reader thought.
    assert await locks.try_acquire(CHAT, first=[backlog_member("4-0")]) is None
    assert await locks.try_acquire(CHAT, first=[backlog_member("3-0")]) is None
    assert await locks.try_acquire(CHAT, [backlog_member("5-0")]) is None  # a redelivery
    session = await sessions.load(CHAT, holder)
    session.last_entry = "3-0"
    await sessions.save(holder, session, holder.writes)
    assert holder.cursor.head == backlog_member("4-0").encode() and "4-0" in holder.cursor.untried
    session.last_entry = "4-0"
    await sessions.save(holder, session, holder.writes)
    assert (
        holder.cursor.head == backlog_member("5-0").encode() and "5-0" not in holder.cursor.untried
    )
    # A holder that was told and died before trying it leaves it tried for the next one.
    await redis.delete(KEYS.lock(CHAT))
    again = await locks.try_acquire(CHAT)
    assert again is not None and again.cursor.head == backlog_member("5-0").encode()
    assert again.cursor.untried == set()


async def test_releasing_keeps_the_lock_while_entries_wait_when_asked(
    redis: aioredis.Redis,
) -> None:
    locks, sessions = locks_on(redis), SessionStore(redis, KEYS, ttl=60)
    holder = await locks.try_acquire(CHAT, first=[backlog_member("3-0")])
    assert holder is not None
    session = await sessions.load(CHAT, holder)
    session.last_entry = "3-0"
    await sessions.save(holder, session, holder.writes)
    assert holder.cursor.head is None
    # An entry arrives after the save looked and before the release.
    assert await locks.try_acquire(CHAT, first=[backlog_member("4-0")]) is None
    await redis.pexpire(KEYS.lock(CHAT), 1000)
    assert await locks.release(holder, keep_if_waiting=True) == 1
    assert holder.cursor.kept and holder.cursor.head == backlog_member("4-0").encode()
    assert "4-0" in holder.cursor.untried
    assert await redis.get(KEYS.lock(CHAT)) == holder.fence.value.encode()
    assert await redis.pttl(KEYS.lock(CHAT)) > 1000  # renewed for a whole lease
    session.last_entry = "4-0"
    await sessions.save(holder, session, holder.writes)
    assert await locks.release(holder, keep_if_waiting=True) == 0
    assert not holder.cursor.kept and not await redis.exists(KEYS.lock(CHAT))


async def test_storing_the_session_takes_its_entry_off_the_backlog_and_reads_the_next(
    redis: aioredis.Redis,
) -> None:
    sessions = SessionStore(redis, KEYS, ttl=60)
    lease = await locks_on(redis).try_acquire(CHAT, [backlog_member("5-0"), backlog_member("6-0")])
    assert lease is not None
    session = await sessions.load(CHAT, lease)
    session.last_entry = "5-0"
    await sessions.save(lease, session, lease.writes)
    assert lease.cursor.done == backlog_member("5-0").encode()
    assert lease.cursor.head is not None and entry_of(lease.cursor.head) == "6-0"
    assert await redis.zrange(KEYS.backlog(CHAT), 0, -1) == [backlog_member("6-0").encode()]

    session.last_entry = "6-0"
    await sessions.save(lease, session, lease.writes)
    assert lease.cursor.head is None
    assert await redis.zcard(KEYS.backlog(CHAT)) == 0


async def test_the_holder_reads_the_session_from_its_holding(redis: aioredis.Redis) -> None:
    sessions = SessionStore(redis, KEYS, ttl=60)
    lease = await locks_on(redis).try_acquire(CHAT)
    assert lease is not None
    session = await sessions.load(CHAT, lease)
    session.status = "awaiting_answer"
    await sessions.save(lease, session, lease.writes)
    # Only the holder writes the session, so its copy is the stored one...
    assert (await sessions.load(CHAT, lease)).status == "awaiting_answer"
    assert (await sessions.load(CHAT)).status == "awaiting_answer"
    # ...and loading through the holding does not read Redis at all.
    await redis.delete(KEYS.session(CHAT))
    assert (await sessions.load(CHAT, lease)).status == "awaiting_answer"
    assert (await sessions.load(CHAT)).status == "idle"


async def test_a_save_writes_the_records_it_is_handed_in_its_own_round_trip(
    redis: aioredis.Redis,
) -> None:
    """`save` takes the pending writes as a parameter: the records handed to it are written
    with the session (test_round_trips.py counts that round trip), and nothing is read off
    the holding behind the caller's back."""
    sessions = SessionStore(redis, KEYS, ttl=60)
    holding = await locks_on(redis).try_acquire(CHAT, [backlog_member("5-0")])
    assert holding is not None
    holding.writes.record("test:not-handed", '"m0"', 60_000)  # not this save's
    writes = PendingWrites()
    writes.record("test:sent", '"m1"', 60_000)
    writes.acks.append("5-0")  # acknowledging an unknown entry is harmless
    session = await sessions.load(CHAT, holding)
    session.last_entry = "5-0"
    await sessions.save(holding, session, writes)
    assert await redis.get("test:sent") == b'"m1"'
    assert await redis.get("test:not-handed") is None
    assert writes.records == {} and writes.acks == []
    assert holding.writes.records == {"test:not-handed": ('"m0"', 60_000)}


async def renewing(redis: aioredis.Redis) -> tuple[ConversationLocks, Holding]:
    """A held lock whose renewer comes every 10 ms instead of every third of the lease, so
    the tests wait no lease out."""
    locks = locks_on(redis)
    locks.renew_every = 0.01
    holder = await locks.try_acquire(CHAT)
    assert holder is not None
    return locks, holder


def renewers() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if "ConversationLocks._keep" in repr(t.get_coro())]


async def test_the_lease_is_renewed_while_the_block_runs_and_the_renewer_stops_with_it(
    redis: aioredis.Redis,
) -> None:
    locks, holder = await renewing(redis)
    async with locks.kept(holder):
        assert len(renewers()) == 1
        await redis.pexpire(KEYS.lock(CHAT), 500)
        await until(lambda: _pttl_above(redis, 1000))  # renewed for a whole lease again
        assert not holder.lost
    assert renewers() == []  # stopped with the block, not left behind
    assert await locks.release(holder) == 0


async def _pttl_above(redis: aioredis.Redis, ms: int) -> bool:
    return int(await redis.pttl(KEYS.lock(CHAT))) > ms


async def test_a_lock_someone_else_took_is_lost_and_its_renewer_ends(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    locks, holder = await renewing(redis)
    async with locks.kept(holder):
        await redis.set(KEYS.lock(CHAT), "someone-else:9")  # the lease ran out; taken over
        await asyncio.wait_for(holder.wait_lost(), 10)
        await until(lambda: renewers() == [])
    assert f"lost the lock of {CHAT}" in caplog.text
    assert await redis.get(KEYS.lock(CHAT)) == b"someone-else:9"


async def test_a_renewal_failing_for_another_reason_than_an_outage_is_raised_not_dropped(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    locks, holder = await renewing(redis)
    await redis.delete(KEYS.lock(CHAT))
    await redis.hset(KEYS.lock(CHAT), "not", "a string")  # the renewal script fails: WRONGTYPE
    with pytest.raises(aioredis.ResponseError, match="WRONGTYPE"):
        async with locks.kept(holder):
            await until(lambda: renewers() == [])  # it ended with the failure
    assert renewers() == []
    # When the block fails too, the block's own failure is raised; the renewal's is logged.
    with pytest.raises(ValueError, match="the block's"):
        async with locks.kept(holder):
            await until(lambda: renewers() == [])
            raise ValueError("the block's")
    assert f"renewing the lock of {CHAT} failed" in caplog.text
    assert "WRONGTYPE" in caplog.text
    await redis.delete(KEYS.lock(CHAT))


def test_only_the_runtime_reads_a_holdings_units() -> None:
    """Outside `bot/runtime/` a holding is handed on, asked whether an entry is on its first
    try, or given records to write (`writes`); its fence and cursor are the runtime's."""
    root = Path(__file__).resolve().parents[3]
    readers = []
    for package in ("bot", "adapters", "agent", "memory"):
        for path in sorted((root / package).rglob("*.py")):
            if path.is_relative_to(root / "bot" / "runtime"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in RUNTIME_ONLY:
                    readers.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
                if isinstance(node, ast.ImportFrom) and node.module == "bot.runtime.holding":
                    names = {alias.name for alias in node.names}
                    readers += [f"{path.relative_to(root)} imports {n}" for n in names & UNITS]
    assert readers == []


RUNTIME_ONLY = {"cursor", "fence", "letting_go", "let_go_after", "untried", "next_up"}
UNITS = {"Fence", "Cursor"}
