"""Poison entries and consumer-group hygiene on the real runtime (Redis Stack, scripted model)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from adapters.base import OutboundMessage
from agent.messages import ChatRequest, ChatResponse
from agent.protocols import MemoryPage, RunContext
from bot.conversation.engine import ERROR_TEXT, LOST_TEXT
from bot.ops.embedded_redis import EmbeddedRedis
from bot.runtime.inbox import encode
from bot.runtime.keys import Keys
from bot.runtime.worker import GROUP
from tests.agent.doubles import ListMemory
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running, settings
from tests.bot.recording import RecordingAdapter, dm, message
from tests.helpers import until

KEYS = Keys()


def echo(request: ChatRequest) -> ChatResponse:
    return reply(f"re: {request.messages[-1].text.split()[-1]}")


def dead_letters(reason: str) -> float:
    return REGISTRY.get_sample_value("parley_dead_letters_total", {"reason": reason}) or 0.0


async def consumers(redis: aioredis.Redis) -> dict[str, int]:
    found = await redis.xinfo_consumers(KEYS.inbox, GROUP)
    return {c["name"].decode(): int(c["pending"]) for c in found}


@dataclass
class BrokenMemory(ListMemory):
    """A memory store whose listing always fails, as a store with a bug would."""

    failures: int = 0

    async def list_memories(
        self, context: RunContext, *, offset: int = 0, limit: int = 20
    ) -> MemoryPage:
        self.failures += 1
        raise RuntimeError("the memory store failed")


def with_thread(event_json: str, thread: object) -> str:
    """A stored event whose thread id has the wrong type (as a buggy gateway could write)."""
    data = json.loads(event_json)
    data["event"]["conversation"]["thread_id"] = thread
    return json.dumps(data)


async def test_undecodable_entries_go_to_the_dead_letter_stream_and_the_rest_is_answered(
    redis: aioredis.Redis,
) -> None:
    before = dead_letters("undecodable")
    chat = dm()
    await redis.xgroup_create(KEYS.inbox, GROUP, id="0", mkstream=True)
    garbage = await redis.xadd(KEYS.inbox, {"event": b"{not json", "queued_at": "0"})
    mistyped = await redis.xadd(
        KEYS.inbox, {"event": with_thread(encode(message(chat, "x")), 1700000000.5)}
    )
    # readable, though its queueing time is not: answered like any other
    await redis.xadd(KEYS.inbox, {"event": encode(message(chat, "m")), "queued_at": "soon"})
    model = ScriptedModel([echo] * 4)
    async with running(redis, model) as harness:
        for index in range(3):
            await harness.submit(message(chat, f"m{index}"))
        await harness.settle()
        assert harness.adapter.texts(chat) == ["re: m", "re: m0", "re: m1", "re: m2"]
        assert harness.runtime.worker.reading.state == "ok"
    letters = await redis.xrange(KEYS.dead_letters)
    assert [f[b"entry"] for _, f in letters] == [garbage, mistyped]
    assert {f[b"reason"] for _, f in letters} == {b"undecodable"}
    assert letters[0][1][b"event"] == b"{not json"
    assert letters[0][1][b"error"] == b"ValidationError"
    assert letters[1][1][b"error"] == b"ValidationError"
    assert dead_letters("undecodable") == before + 2


async def test_the_reclaimer_survives_a_poison_entry_left_by_a_dead_worker(
    redis: aioredis.Redis,
) -> None:
    chat = dm()
    await redis.xgroup_create(KEYS.inbox, GROUP, id="0", mkstream=True)
    poison = await redis.xadd(KEYS.inbox, {"event": with_thread(encode(message(chat, "x")), 7)})
    await redis.xadd(KEYS.inbox, {"event": encode(message(chat, "hello"))})
    # A worker read both and died; its entries wait for the reclaimer of a live one.
    await redis.xreadgroup(GROUP, "dead-worker", {KEYS.inbox: ">"}, count=10)
    model = ScriptedModel([echo] * 2)
    async with running(redis, model) as harness:
        await harness.settle(within=20)
        assert harness.adapter.texts(chat) == ["re: hello"]
        # later messages are answered too: the reclaimer and the reader still run
        await harness.submit(message(chat, "again"))
        await harness.settle(within=20)
        assert harness.adapter.texts(chat) == ["re: hello", "re: again"]
        assert harness.runtime.worker.reclaiming.state == "ok"
    [(_, letter)] = await redis.xrange(KEYS.dead_letters)
    assert letter[b"entry"] == poison and letter[b"reason"] == b"undecodable"


async def test_a_failing_entry_is_tried_max_attempts_times_across_a_restart_then_dead_lettered(
    redis: aioredis.Redis,
) -> None:
    before = dead_letters("failed")
    chat = dm()
    memory = BrokenMemory()
    model = ScriptedModel([echo] * 10)
    config = settings(PARLEY_MAX_ATTEMPTS=3)
    async with running(redis, model, memory=memory, config=config) as first:
        await first.submit(message(chat, "/memories", command="memories"))
        await until(lambda: _failed(memory, 1))
        first_name = first.runtime.worker.name
    # stopped while the entry waited for its next try: it stays pending for the others
    assert (await consumers(redis))[first_name] == 1
    assert 1 <= memory.failures < 3

    async with running(redis, model, memory=memory, config=config) as second:
        second.runtime.worker.reclaimer.forget_idle = 0.5
        await second.submit(message(chat, "fine"))
        await second.settle(within=30)
        # the rest of the three tries here, then the user is told once and the queue moves on
        assert memory.failures == 3
        assert second.adapter.texts(chat) == [ERROR_TEXT, "re: fine"]
        assert (await second.runtime.sessions.load(chat.id)).status == "idle"
        # the worker that left is removed from the group once it has nothing pending
        await until(lambda: _gone(redis, first_name))
        second_name = second.runtime.worker.name
    letters = await redis.xrange(KEYS.dead_letters)
    assert len(letters) == 1
    letter = letters[0][1]
    assert letter[b"reason"] == b"failed" and letter[b"attempts"] == b"3"
    assert letter[b"error"] == b"RuntimeError"
    assert b"memories" in letter[b"event"]
    assert dead_letters("failed") == before + 1
    assert not await redis.hlen(KEYS.attempts(chat.id))
    # and a worker that stops cleanly with nothing pending leaves the group itself
    assert second_name not in await consumers(redis)


async def _failed(memory: BrokenMemory, count: int) -> bool:
    return memory.failures >= count


async def _gone(redis: aioredis.Redis, name: str) -> bool:
    return name not in await consumers(redis)


class AnswerDropper:
    """A TCP proxy in front of Redis that can lose Redis's answers: the commands still run, as
    when Redis goes away between doing a command and answering it."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.drop = False
        self.port = 0

    async def __aenter__(self) -> AnswerDropper:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, answers: bool):
            try:
                while data := await source.read(65536):
                    if answers and self.drop:
                        return  # the answer is lost and the connection closed
                    sink.write(data)
                    await sink.drain()
            finally:
                sink.close()

        await asyncio.gather(
            pipe(reader, upstream, False),
            pipe(upstream_reader, writer, True),
            return_exceptions=True,
        )


async def test_a_reply_claim_stored_while_its_answer_was_lost_is_sent_by_the_replay(
    redis: aioredis.Redis, redis_server: EmbeddedRedis
) -> None:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    from bot.runtime.outbox import Outbox

    adapter = RecordingAdapter()
    chat, hello = dm(), OutboundMessage(text="hello")
    async with AnswerDropper(redis_server.port) as proxy:
        client = aioredis.Redis(port=proxy.port, retry=Retry(NoBackoff(), 0))
        try:
            outbox = Outbox(client, KEYS, ttl=60, lost_text=LOST_TEXT)
            await client.ping()
            proxy.drop = True
            with pytest.raises(RedisConnectionError):
                await outbox.send(adapter, "1-0:1", chat, hello)
            proxy.drop = False
            assert await redis.exists(KEYS.outbox("1-0:1"))  # Redis took the claim
            assert adapter.posted == []
            # the replay knows nothing was sent under that claim, and sends
            ref = await outbox.send(adapter, "1-0:1", chat, hello)
            assert ref is not None and adapter.texts() == ["hello"]
            # and a later replay posts nothing new
            again = await outbox.send(adapter, "1-0:1", chat, hello)
            assert again == ref and adapter.texts() == ["hello"]
            # while a claim this process did not make is still never sent again
            await redis.set(KEYS.outbox("2-0:1"), b"in-flight:someone-else")
            assert await outbox.send(adapter, "2-0:1", chat, hello) is None
            assert adapter.texts() == ["hello"]
        finally:
            await client.aclose()
