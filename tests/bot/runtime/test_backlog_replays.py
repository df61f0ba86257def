"""A holder drains a backlog that the reclaimer refilled with entries it already handled.

An entry's acknowledgement rides with the holder's next write, so for a moment a handled
entry is still pending; a reclaimer that claims it then puts its member back on the backlog
(through a lock try that finds the lock taken). The holder must take such a member off as a
no-op and go on: it once spun on it for ever, because the check "did this entry's save take
it off?" compared against the member an earlier save had taken off.
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from adapters.base import Inbound
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys, backlog_member
from bot.runtime.locks import ConversationLocks, Holding
from bot.runtime.sessions import SessionStore
from bot.runtime.worker import GROUP, Worker
from tests.bot.recording import dm, message


async def test_members_put_back_after_their_saves_are_taken_off_and_the_drain_ends(
    redis: aioredis.Redis,
) -> None:
    chat = dm()
    keys = Keys()
    sessions = SessionStore(redis, keys, ttl=60)
    backlog = keys.backlog(chat.id)
    runs: list[str] = []
    calls: list[str] = []

    async def handle(entry_id: str, event: Inbound, holding: Holding) -> None:
        calls.append(entry_id)
        session = await sessions.load(holding.conversation_id, holding)
        if session.last_entry and session.last_entry >= entry_id:
            return  # a replay: already stored, nothing to do (as the executor does)
        runs.append(entry_id)
        if entry_id == two:  # the reclaimer claims `one`, handled but not yet acknowledged
            await redis.zadd(backlog, {backlog_member(one): 0}, nx=True)
        session.last_entry = entry_id
        await sessions.save(holding, session, holding.writes)
        if entry_id == two:  # and `two` right after its save
            await redis.zadd(backlog, {backlog_member(two): 0}, nx=True)

    inbox = Inbox(redis, keys, dedup_ttl=60)
    locks = ConversationLocks(redis, keys, lease=5, ttl=60)
    worker = Worker(redis, keys, locks, handle, block=0.05)
    await worker.ensure_group()
    for text in ("one", "two"):
        await inbox.submit(message(chat, text))
    one, two = [e.decode() for e, _ in await redis.xrange(keys.inbox)]
    reading = asyncio.create_task(worker.run())
    try:
        deadline = time.monotonic() + 20
        while len(runs) < 2 or worker._tasks or await redis.zcard(backlog):
            assert len(calls) < 20, f"the holder keeps handling the same entries: {calls}"
            assert time.monotonic() < deadline, f"not drained: {calls}"
            await asyncio.sleep(0.01)
    finally:
        worker.stop()
        await reading
        await worker.leave()
    assert runs == [one, two]
    assert calls == [one, two, one, two]  # each put-back member handled once, as a no-op
    assert not await redis.xpending_range(keys.inbox, GROUP, min="-", max="+", count=10)
    assert not await redis.exists(keys.lock(chat.id))
