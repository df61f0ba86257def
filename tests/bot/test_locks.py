"""The conversation lock's round trips carry what its holder needs next: taking it puts new
entries on the backlog and reads the oldest one and the session; storing the session takes
the handled entry off and reads the next; releasing it says how many still wait."""

from __future__ import annotations

import redis.asyncio as aioredis

from bot.runtime.keys import Keys, backlog_member, entry_of
from bot.runtime.locks import ConversationLocks
from bot.runtime.sessions import Session, SessionStore

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
    assert lease.head is not None and entry_of(lease.head) == "7-0"
    assert lease.added == set(members)
    assert lease.session is not None
    assert Session.model_validate_json(lease.session).last_entry == "1-0"
    assert await redis.zrange(KEYS.backlog(CHAT), 0, -1) == [m.encode() for m in sorted(members)]
    assert 0 < await redis.pttl(KEYS.backlog(CHAT)) <= 60_000


async def test_entries_go_on_the_backlog_even_while_someone_else_holds_the_lock(
    redis: aioredis.Redis,
) -> None:
    locks = locks_on(redis)
    holder = await locks.try_acquire(CHAT, [backlog_member("3-0")])
    assert holder is not None and holder.session is None
    assert await locks.try_acquire(CHAT, [backlog_member("4-0")]) is None
    assert await redis.zcard(KEYS.backlog(CHAT)) == 2
    assert await locks.release(holder) == 2  # both wait: the holder knows to drain again
    # Only what this acquisition put on the backlog counts as added by it.
    again = await locks.try_acquire(CHAT, [backlog_member("3-0"), backlog_member("8-0")])
    assert again is not None and again.added == {backlog_member("8-0")}


async def test_storing_the_session_takes_its_entry_off_the_backlog_and_reads_the_next(
    redis: aioredis.Redis,
) -> None:
    sessions = SessionStore(redis, KEYS, ttl=60)
    lease = await locks_on(redis).try_acquire(CHAT, [backlog_member("5-0"), backlog_member("6-0")])
    assert lease is not None
    session = await sessions.load(CHAT, lease)
    session.last_entry = "5-0"
    await sessions.save(lease, session)
    assert lease.done == backlog_member("5-0").encode()
    assert lease.head is not None and entry_of(lease.head) == "6-0"
    assert await redis.zrange(KEYS.backlog(CHAT), 0, -1) == [backlog_member("6-0").encode()]

    session.last_entry = "6-0"
    await sessions.save(lease, session)
    assert lease.head is None
    assert await redis.zcard(KEYS.backlog(CHAT)) == 0


async def test_the_holder_reads_the_session_from_its_lease(redis: aioredis.Redis) -> None:
    sessions = SessionStore(redis, KEYS, ttl=60)
    lease = await locks_on(redis).try_acquire(CHAT)
    assert lease is not None
    session = await sessions.load(CHAT, lease)
    session.status = "awaiting_answer"
    await sessions.save(lease, session)
    # Only the holder writes the session, so its copy is the stored one...
    assert (await sessions.load(CHAT, lease)).status == "awaiting_answer"
    assert (await sessions.load(CHAT)).status == "awaiting_answer"
    # ...and loading through the lease does not read Redis at all.
    await redis.delete(KEYS.session(CHAT))
    assert (await sessions.load(CHAT, lease)).status == "awaiting_answer"
    assert (await sessions.load(CHAT)).status == "idle"
