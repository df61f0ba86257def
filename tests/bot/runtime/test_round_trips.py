"""What the runtime reads and writes in Redis around a run, and when: a new run's session is
stored once, when the run is over (a crash before that replays the entry from the stored
session); nothing is read back on an entry's first delivery; the answer's outbox record
goes with the session save; and an entry is acknowledged with the lock holder's next write
after its session is stored. The exact round trips of one objective, and of a backlog
drained under one lock, are counted per connection write (`tests/bot/trips.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator

import pytest
import redis as syncredis
import redis.asyncio as aioredis

from adapters.base import Inbound
from agent.messages import ChatRequest, ChatResponse
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys, backlog_member
from bot.runtime.locks import ConversationLocks, Holding
from bot.runtime.sessions import Session, SessionStore
from bot.runtime.worker import GROUP, Worker
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, running, settings
from tests.bot.recording import click, dm, message
from tests.bot.runtime.test_delivery import ANA, CONVERSATION, bot, texts, until
from tests.bot.trips import TripLog, counted
from tests.fakes.telegram import FakeTelegram

# The service's periodic loops: their round trips are not an objective's. The reading loop's
# XREADGROUP is shared by whatever it reads (a fraction of one per objective under load).
# The loops' passes (`loops.repeat` runs each as its own task, raced against the stop)
PERIODIC = {
    "Worker.run",
    "Reclaimer.run",
    "Reclaimer._one_pass",
    "ReminderScheduler.due_pass",  # the due-work loops' passes (bot/runtime/due.py)
    "ScheduleClock.due_pass",
    "Outbox.redeliver",
    "Runtime._sample_gauges.<locals>.one_pass",
    "Stops.listen.<locals>.subscribed",  # one subscription per process, not per objective
}


async def test_a_new_run_stores_its_session_only_once_it_is_over(
    redis: aioredis.Redis, redis_url: str
) -> None:
    chat = dm()
    stored_during_runs: list[Session] = []
    reader = syncredis.Redis.from_url(redis_url)

    def answer(request: ChatRequest) -> ChatResponse:
        raw = reader.get(f"parley:conv:{{{chat.id}}}:session")
        stored_during_runs.append(Session.model_validate_json(raw) if raw else Session())
        return reply(f"re: {request.messages[-1].text}")

    model = ScriptedModel([answer, answer])
    try:
        async with running(redis, model) as harness:
            await harness.submit(message(chat, "first"))
            await harness.settle()
            first = await harness.runtime.sessions.load(chat.id)
            await harness.submit(message(chat, "second"))
            await harness.settle()
            second = await harness.runtime.sessions.load(chat.id)
    finally:
        reader.close()
    assert harness.adapter.texts(chat) == ["re: first", "re: second"]
    # While the second run worked, Redis still held what the first one left.
    assert stored_during_runs[0].status == "idle" and stored_during_runs[0].state is None
    assert stored_during_runs[1].model_dump() == first.model_dump()
    assert first.last_entry is not None and second.last_entry is not None
    assert second.last_entry != first.last_entry and second.status == "idle"


async def test_a_first_delivery_reads_nothing_back_and_records_its_answer_with_the_session(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    async with bot(redis, telegram, ScriptedModel([reply("Hello Ana!")])) as harness:
        async with monitored(redis_url) as commands:
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
            await until(lambda: bool(telegram.chat(ANA)))
            await harness.settle()
            await asyncio.sleep(0.3)  # the monitor's last lines
        [(entry, _)] = await redis.xrange(harness.runtime.keys.inbox)
        record = await redis.get(harness.runtime.keys.outbox(f"{entry.decode()}:outcome"))
        assert record == json.dumps(str(telegram.chat(ANA)[0].message_id)).encode()
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.last_entry == entry.decode()
    assert texts(telegram) == ["Hello Ana!"]
    # The session came with the lock, and a streamed answer on its first delivery cannot
    # meet what an earlier attempt left under its outbox key: neither is read on its own.
    reads = [c for c in commands if c.startswith("GET ")]
    assert any(c.startswith("SET parley:outbox:") for c in commands)
    assert not [c for c in reads if "outbox" in c or "session" in c], reads


def objective_trips(log: TripLog, since: int, until: int) -> list[tuple[str, ...]]:
    """The round trips made for objectives between two points of the log: none of the
    periodic loops', nor the harness's (creating the consumer group, waiting with XINFO)."""
    return [
        trip.commands
        for trip in log[since:until]
        if trip.task not in PERIODIC and trip.commands not in {("XINFO",), ("XGROUP",)}
    ]


async def warmed_up(harness: Harness) -> None:
    """One objective in another conversation, so every script is loaded (a first EVALSHA
    costs a NOSCRIPT answer and a SCRIPT LOAD) and the connections are open."""
    await harness.submit(message(dm("7"), "warm up", user="7"))
    await harness.settle()


async def test_one_objective_costs_four_round_trips_and_a_share_of_a_read(
    redis: aioredis.Redis, redis_url: str
) -> None:
    chat = dm()
    model = ScriptedModel([reply("warm"), reply("Hello Ana!")])
    async with counted(redis_url) as (client, log), running(client, model) as harness:
        await warmed_up(harness)
        since = len(log)
        await harness.submit(message(chat, "hi"))
        await harness.settle()
        until = len(log)
    assert harness.adapter.texts(chat) == ["Hello Ana!"]
    assert objective_trips(log, since, until) == [
        ("EVALSHA",),  # the inbox: dedup and append
        ("EVALSHA",),  # the lock: queue the entry, read the backlog's head and the session
        ("SET",),  # the answer's outbox claim, before it is sent
        ("SET", "EVAL"),  # the answer's record with the session save, which lets go of the lock
    ]
    assert ("XACK", "XREADGROUP") in TripLog(log[since:until]).by("Worker.run")  # next read


async def test_a_question_is_stored_once_with_its_message_in_the_session_save(
    redis: aioredis.Redis, redis_url: str
) -> None:
    chat = dm()
    asking = turn(call("ask_user", question="Which size?", options=["Small", "Large"]))
    model = ScriptedModel([reply("warm"), asking, reply("Large it is.")])
    async with counted(redis_url) as (client, log), running(client, model) as harness:
        await warmed_up(harness)
        since = len(log)
        await harness.submit(message(chat, "order a pizza"))
        await harness.settle()
        until = len(log)
        [question] = harness.adapter.in_conversation(chat)
        session = await harness.runtime.sessions.load(chat.id)
        assert session.status == "awaiting_answer" and session.decision_id is not None
        decision = await harness.runtime.decisions.get(session.decision_id)
        assert decision is not None and decision.message_id == question.ref.message_id
        await harness.submit(click(chat, question, "1"))
        await harness.settle()
    assert harness.adapter.texts(chat)[-1] == "Large it is."
    assert question.current.buttons == () and "Large" in question.current.text
    assert objective_trips(log, since, until) == [
        ("EVALSHA",),
        ("EVALSHA",),
        ("SET",),  # the prompt's outbox claim
        # its record, the decision (with the prompt's id) and the session: one round trip
        ("SET", "HSET", "PEXPIRE", "ZADD", "EVAL"),
    ]


async def test_a_backlog_drained_under_one_lock_acknowledges_each_entry_with_the_next_write(
    redis: aioredis.Redis, redis_url: str
) -> None:
    chat = dm()
    keys = None
    pending_during_runs: list[set[str]] = []
    reader = syncredis.Redis.from_url(redis_url)

    def answer(request: ChatRequest) -> ChatResponse:
        pending = reader.xpending_range("parley:inbox", GROUP, min="-", max="+", count=10)
        pending_during_runs.append({p["message_id"].decode() for p in pending})
        return reply(f"re: {request.messages[-1].text}")

    model = ScriptedModel([reply("warm"), answer, answer, answer])
    try:
        async with counted(redis_url) as (client, log):
            async with running(client, model) as harness:
                await warmed_up(harness)
                keys = harness.runtime.keys
            # Three entries wait before a worker reads: one read, one lock, one drain.
            inbox = Inbox(client, keys, dedup_ttl=60)
            for text in ("one", "two", "three"):
                assert await inbox.submit(message(chat, text))
            entries = [e.decode() for e, _ in await redis.xrange(keys.inbox)][-3:]
            since = len(log)
            async with running(client, model) as harness:
                await harness.settle()
                until = len(log)
    finally:
        reader.close()
    assert harness.adapter.texts(chat) == ["re: one", "re: two", "re: three"]
    assert objective_trips(log, since, until) == [
        ("EVALSHA",),  # the lock, which also puts the three entries on the backlog
        ("SET",),
        ("SET", "EVAL"),  # one's session save (which reads the next entry)
        ("SET",),
        ("SET", "XACK", "EVAL"),  # two's save acknowledges one
        ("SET",),
        ("SET", "XACK", "EVAL"),  # three's save acknowledges two, and lets go of the lock
    ]
    assert ("XACK", "XREADGROUP") in TripLog(log[since:until]).by("Worker.run")  # three's
    # An entry is acknowledged only once its session is stored: each run still saw the
    # entry before it pending.
    assert [entries[0] in p for p in pending_during_runs] == [True, True, False]
    assert [entries[1] in p for p in pending_during_runs] == [True, True, True]
    assert not await redis.xpending_range(keys.inbox, GROUP, min="-", max="+", count=10)
    assert not await redis.exists(keys.backlog(chat.id))


async def test_a_long_run_does_not_hold_back_the_acknowledgement_of_the_entry_before_it(
    redis: aioredis.Redis, redis_url: str
) -> None:
    """The renewal carries the waiting acknowledgement: a run longer than the reclaimer's
    idle time must not get the entry before it taken over by another worker."""
    chat = dm()
    pending_in_second_run: list[set[str]] = []
    reader = syncredis.Redis.from_url(redis_url)
    model = ScriptedModel([])

    def first(request: ChatRequest) -> ChatResponse:
        model.latency = 2.5  # the next run outlasts two renewals (every lease / 3 = 1 s)
        return reply("first")

    def second(request: ChatRequest) -> ChatResponse:
        pending = reader.xpending_range("parley:inbox", GROUP, min="-", max="+", count=10)
        pending_in_second_run.append({p["message_id"].decode() for p in pending})
        return reply("second")

    model.push(first, second)
    keys = None
    try:
        async with running(redis, model, config=settings(PARLEY_LOCK_LEASE=3)) as harness:
            keys = harness.runtime.keys
            await harness.runtime.worker.ensure_group()
        inbox = Inbox(redis, keys, dedup_ttl=60)
        for text in ("one", "two"):
            await inbox.submit(message(chat, text))
        one, two = [e.decode() for e, _ in await redis.xrange(keys.inbox)]
        async with running(redis, model, config=settings(PARLEY_LOCK_LEASE=3)) as harness:
            await harness.settle(within=20)
    finally:
        reader.close()
    assert harness.adapter.texts(chat) == ["first", "second"]
    assert pending_in_second_run == [{two}]  # one was acknowledged while two ran


async def test_an_entry_stored_but_left_unacknowledged_by_a_dead_worker_replays_as_a_no_op(
    redis: aioredis.Redis,
) -> None:
    chat = dm()
    model = ScriptedModel([reply("Hello Ana!")])
    async with running(redis, model) as harness:
        await harness.submit(message(chat, "hi"))
        await harness.settle()
        keys, sessions = harness.runtime.keys, harness.runtime.sessions
    # A worker that read the next entry, stored its session and died before acknowledging it
    # (its acknowledgement waited for its next write).
    await Inbox(redis, keys, dedup_ttl=60).submit(message(chat, "are you there?"))
    [_, (entry, _)] = await redis.xrange(keys.inbox)
    await redis.xreadgroup(GROUP, "dead-worker", {keys.inbox: ">"}, count=10)
    session = await sessions.load(chat.id)
    session.last_entry = entry.decode()
    await redis.set(keys.session(chat.id), session.model_dump_json())
    assert await redis.zscore(keys.backlog(chat.id), backlog_member(entry.decode())) is None
    async with running(redis, model) as harness:
        await harness.settle(within=20)  # reclaimed after PARLEY_RECLAIM_IDLE, then handled
    assert harness.adapter.texts(chat) == []  # no second run, no reply
    assert len(model.requests) == 1
    assert not await redis.xpending_range(keys.inbox, GROUP, min="-", max="+", count=10)


async def test_the_save_of_the_last_waiting_entry_lets_go_of_the_lock(
    redis: aioredis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No round trip of its own for the release: the acknowledgement goes with the worker's
    next read. The renewal, still due as the holder finishes, does not take the lock its
    save let go of for a lost one."""
    caplog.set_level(logging.WARNING, logger="bot.runtime.locks")
    chat = dm()
    keys = Keys()
    handled: list[tuple[str, bool, bool]] = []
    async with counted(redis_url) as (client, log):
        sessions = SessionStore(client, keys, ttl=60)
        inbox = Inbox(client, keys, dedup_ttl=60)

        async def handle(entry_id: str, event: Inbound, holding: Holding) -> None:
            session = await sessions.load(holding.conversation_id, holding)
            session.last_entry = entry_id
            await sessions.save(holding, session, holding.writes)
            handled.append((entry_id, holding.first_try(entry_id), holding.released))
            await asyncio.sleep(0.7)  # renewals fall due (every 0.2 s) with the lock gone

        locks = ConversationLocks(client, keys, lease=0.6, ttl=60)
        worker = Worker(client, keys, locks, handle, block=0.05)
        await worker.ensure_group()
        reading = asyncio.create_task(worker.run())
        try:
            for n, text in enumerate(("one", "two"), start=1):
                await inbox.submit(message(chat, text))
                deadline = time.monotonic() + 20
                while len(handled) < n or worker._tasks or await pending(redis, keys):
                    assert time.monotonic() < deadline, f"not handled and acknowledged: {handled}"
                    await asyncio.sleep(0.01)
        finally:
            worker.stop()
            await reading
    one, two = [e.decode() for e, _ in await redis.xrange(keys.inbox)]
    assert handled == [(one, True, True), (two, True, True)]
    assert log.by("Worker._drain_conversation") == [("EVALSHA",), ("EVALSHA",)]  # locks only
    assert log.by("Worker.run").count(("XACK", "XREADGROUP")) == 2
    assert not await redis.exists(keys.lock(chat.id), keys.backlog(chat.id))
    assert not [r for r in caplog.records if "lost the lock" in r.getMessage()]


async def pending(redis: aioredis.Redis, keys: Keys) -> list[object]:
    return await redis.xpending_range(keys.inbox, GROUP, min="-", max="+", count=10)  # type: ignore[no-any-return]


class Gated(ScriptedModel):
    """A scripted model that answers only once `opened` is set."""

    def __init__(self, *script: ChatResponse) -> None:
        super().__init__(list(script))
        self.asked = asyncio.Event()
        self.opened = asyncio.Event()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.asked.set()
        await self.opened.wait()
        return await super().complete(request)


async def test_an_entry_first_delivered_while_another_runs_streams_without_reading_back(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    model = Gated(reply("One."), reply("Two."))
    async with bot(redis, telegram, model) as harness:
        backlog = harness.runtime.keys.backlog(CONVERSATION)
        async with monitored(redis_url) as commands:
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="one"))
            await asyncio.wait_for(model.asked.wait(), 20)
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="two"))
            deadline = time.monotonic() + 20
            while await redis.zcard(backlog) < 2:  # two waits behind one
                assert time.monotonic() < deadline, "two never reached the backlog"
                await asyncio.sleep(0.01)
            model.opened.set()
            await until(lambda: len(telegram.chat(ANA)) == 2)
            await harness.settle()
            await asyncio.sleep(0.3)  # the monitor's last lines
    assert texts(telegram) == ["One.", "Two."]
    # Two was put on the backlog by a worker that could not take the lock; the holder was
    # told it is untried, so its streamed answer did not read its outbox key either.
    reads = [c for c in commands if c.startswith("GET ")]
    assert not [c for c in reads if "outbox" in c or "session" in c], reads


@contextlib.asynccontextmanager
async def monitored(redis_url: str) -> AsyncIterator[list[str]]:
    """The commands clients send while the block runs (not those scripts run)."""
    client = aioredis.Redis.from_url(redis_url)
    seen: list[str] = []
    async with client.monitor() as monitor:

        async def collect() -> None:
            async for command in monitor.listen():
                if command.get("client_type") != "lua":
                    seen.append(str(command["command"]))

        task = asyncio.create_task(collect())
        try:
            yield seen
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    await client.aclose()
