"""`parley memory reindex` moves every memory to another embedder while Parley runs: a new
index beside the old, memories written meanwhile land in both, one switch, the old index
removed; cut off with kill -9 it leaves the running store untouched and a second run
finishes the move."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis.asyncio as aioredis
from redisvl.utils.vectorize import CustomVectorizer

from agent.protocols import RunContext
from memory import (
    Embedder,
    MemoryConfig,
    MemoryIndexMismatch,
    RedisMemoryStore,
    multilingual_embedder,
    open_store,
)

ROOT = Path(__file__).parent.parent.parent


def person(user: str) -> RunContext:
    return RunContext(
        conversation_id=f"telegram:{user}:-",
        platform="telegram",
        user_id=user,
        chat_id=user,
        is_direct=True,
    )


ANA, BEN = person("11"), person("12")
FACTS = [
    f"Ana's note number {n}: the {thing} is in drawer {n}"
    for n, thing in enumerate(
        [
            "passport",
            "spare key",
            "warranty",
            "charger",
            "receipt",
            "USB stick",
            "tax letter",
            "bike pump",
            "camera",
            "diary",
            "checkbook",
            "glasses",
            "headphones",
            "map",
            "stamp",
            "torch",
            "ruler",
            "calculator",
            "battery",
            "notebook",
        ]
    )
]


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return multilingual_embedder()


class Gate:
    """Holds the move's second batch until the test has written what it writes 'during'."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()


def gated(embedder: Embedder, gate: Gate) -> Embedder:
    inner = embedder.vectorizer

    async def embed_many(texts: list[str], **kwargs: Any) -> list[list[float]]:
        gate.calls += 1
        if gate.calls == 2:
            gate.entered.set()
            await gate.release.wait()
        return await inner.aembed_many(texts, **kwargs)  # type: ignore[no-any-return]

    vectorizer = CustomVectorizer(
        embed=inner.embed, embed_many=inner.embed_many, aembed=inner.aembed, aembed_many=embed_many
    )
    return dataclasses.replace(embedder, vectorizer=vectorizer)


@pytest.fixture
async def filled(redis: aioredis.Redis, embedder: Embedder) -> AsyncIterator[RedisMemoryStore]:
    """The running service's store on the English model, holding Ana's 20 memories and one
    of Ben's."""
    store = await open_store(redis, embedder)
    for fact in FACTS:
        await store.remember(fact, ANA)
    await store.remember("Ben's locker code is 4471", BEN)
    yield store


async def vector_of(redis: aioredis.Redis, key: str, field: str) -> np.ndarray | None:
    raw = await redis.hget(key, field)
    return None if raw is None else np.frombuffer(raw, dtype=np.float32)


async def index_names(redis: aioredis.Redis) -> set[str]:
    return {name.decode() for name in await redis.execute_command("FT._LIST")}


async def test_memories_written_during_the_move_reach_the_new_index(
    redis: aioredis.Redis, filled: RedisMemoryStore, e5: Embedder
) -> None:
    gate = Gate()
    target = RedisMemoryStore(redis, gated(e5, gate), config=MemoryConfig.tuned(e5.tuning))
    seen: list[tuple[int, int]] = []
    moving = asyncio.create_task(target.reindex(batch=8, progress=lambda *p: seen.append(p)))
    await asyncio.wait_for(gate.entered.wait(), 60)
    # The service keeps working on the old index meanwhile: it writes, changes and forgets.
    assert await redis.exists("parley:memory:moving")
    added = [
        await filled.remember("Ana's sister Lucía lives in Valencia", ANA),
        await filled.remember("Ana is allergic to walnuts", ANA),
    ]
    changed = await filled.remember("Ben's locker code is 4471!", BEN)  # merged in place
    page = await filled.list_memories(ANA, limit=100)
    forgotten = next(r for r in page.records if "passport" in r.text)
    assert await filled.forget(ANA, forgotten.id) == 1
    assert [r.text for r in await filled.recall("where does Ana's sister live?", ANA)][:1] == [
        "Ana's sister Lucía lives in Valencia"
    ]  # the old index serves them at once
    gate.release.set()
    embedded = await asyncio.wait_for(moving, 120)

    assert embedded >= 21 + 2 - 1  # every memory still there, and the ones written meanwhile
    assert seen[0] == (0, 21) and seen[-1][0] == seen[-1][1]
    assert await index_names(redis) == {"parley:memory:g1"}  # the old index removed
    assert not await redis.exists("parley:memory:moving", "parley:memory:dirty")
    new = await open_store(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    memories = (await new.list_memories(ANA, limit=100)).records
    assert len(memories) == 21 and forgotten.id not in {m.id for m in memories}
    for record in [*added, changed]:
        key = new._key(record.id)
        assert await redis.hget(key, "embedding") is None  # the old vectors deleted
        stored = await vector_of(redis, key, "embedding_g1")
        assert stored is not None
        expected = np.asarray(await e5.embed(record.text), dtype=np.float32)
        assert float(stored @ expected) > 0.999  # the vector of the text as it is now
    found = await new.recall("¿dónde vive la hermana de Ana?", ANA)
    assert found and found[0].text == "Ana's sister Lucía lives in Valencia"
    assert await new.count([ANA.user_scope]) == 21
    with pytest.raises(MemoryIndexMismatch, match="parley memory reindex"):
        await open_store(redis, filled.embedder)


async def test_a_memory_written_on_the_old_index_after_the_switch_is_not_lost(
    redis: aioredis.Redis, filled: RedisMemoryStore, e5: Embedder
) -> None:
    target = RedisMemoryStore(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    await target.reindex(batch=16)
    # A process still on the old model wrote just as the switch happened: its write note
    # names the index it wrote for, so the next store to open embeds it for the new one.
    key = "parley:memory:doc:late1"
    await redis.hset(
        key,
        mapping={
            "id": "late1",
            "text": "Ana parks on level 3",
            "kind": "fact",
            "scope": ANA.user_scope,
            "author": ANA.user_id,
            "source": ANA.conversation_id,
            "created_at": 1.0,
            "last_used_at": 1.0,
        },
    )
    await filled.noted(key)
    assert await redis.sismember("parley:memory:dirty", key)
    reopened = await open_store(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    assert await vector_of(redis, key, "embedding_g1") is not None
    assert not await redis.exists("parley:memory:dirty")
    found = await reopened.recall("which level does Ana park on?", ANA)
    assert "Ana parks on level 3" in [r.text for r in found]


@pytest.mark.process
async def test_a_move_killed_midway_leaves_the_service_working_and_a_second_run_finishes(
    redis: aioredis.Redis, redis_url: str, filled: RedisMemoryStore, e5: Embedder
) -> None:
    writer = await open_store(redis, filled.embedder, config=MemoryConfig(merge_distance=0.0))
    for n in range(40):  # enough batches to be cut off in the middle
        await writer.remember(f"Ben's archive box {n} holds the {n}th year of letters", BEN)
    bens = 41
    total = 20 + bens
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "PARLEY_EMBEDDER": "multilingual",
    }
    command = [sys.executable, "-m", "bot.cli", "--env-file", "/dev/null", "memory", "reindex"]
    child = await asyncio.create_subprocess_exec(
        *command, "--batch", "4", cwd=ROOT, env=env, stderr=asyncio.subprocess.PIPE
    )
    assert child.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(120):
            while line := (await child.stderr.readline()).decode():
                lines.append(line)
                done = line.split()[1].split("/")[0] if line.startswith("embedded ") else "0"
                if 8 <= int(done) < total:
                    break
    finally:
        child.send_signal(signal.SIGKILL)  # cut off mid-way, as a crash or an OOM kill would
        await child.wait()
    assert any(line.startswith("embedded ") for line in lines), lines
    # cut off: the service's index is as it was, and it recalls as before
    assert await redis.exists("parley:memory:moving")
    assert "parley:memory" in await index_names(redis)
    assert [r.text for r in await filled.recall("Ben's locker code?", BEN)][:1] == [
        "Ben's locker code is 4471"
    ]
    with pytest.raises(MemoryIndexMismatch, match="moving to multilingual-e5-small-q4"):
        await open_store(redis, e5)
    # a second run resumes: what the first one embedded is not embedded again
    target = RedisMemoryStore(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    embedded = await target.reindex(batch=16)
    assert 0 < embedded < total
    assert await index_names(redis) == {"parley:memory:g1"}
    new = await open_store(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    assert (await new.list_memories(BEN, limit=100)).total == bens
    # and a run after a finished move rebuilds everything again, losing nothing
    again = RedisMemoryStore(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    assert await again.reindex(batch=32) == total
    assert await index_names(redis) == {"parley:memory:g2"}
    reopened = await open_store(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    assert (await reopened.list_memories(ANA, limit=100)).total == 20
    assert (await reopened.list_memories(BEN, limit=100)).total == bens
    found = await reopened.recall("Ben's locker code?", BEN)
    assert [r.text for r in found][:1] == ["Ben's locker code is 4471"]
