"""What memory keeps and shows: full scopes refuse instead of evicting, listings are scoped
and paginated, generic questions list, reindex keeps everything, the model file is checked."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from agent.builtin_tools import builtin_registry
from agent.protocols import MemoryFull
from agent.tools import ToolContext
from memory import (
    Embedder,
    EmbeddingModelError,
    MemoryConfig,
    MemoryIndexMismatch,
    RedisMemoryStore,
    local_embedder,
    open_store,
)
from memory.embedders import RUN_MODEL
from tests.memory.test_store import ANA_DM, ANA_IN_CHANNEL, BOB_DM, BOB_IN_CHANNEL


def full_count(scope: str) -> float:
    return REGISTRY.get_sample_value("parley_memory_full_total", {"scope": scope}) or 0.0


async def test_a_full_scope_refuses_and_never_evicts_a_remembered_fact(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder, config=MemoryConfig(max_per_user=3))
    facts = ["I own a red bicycle", "My cat is called Miso", "I work night shifts"]
    for fact in facts:
        await store.remember(fact, ANA_DM)
    before = full_count("private")
    with pytest.raises(MemoryFull) as refused:
        await store.remember("My favourite band is Radiohead", ANA_DM)
    assert refused.value.limit == 3
    assert full_count("private") == before + 1
    # an extracted fact may not push one out either
    with pytest.raises(MemoryFull):
        await store.remember("Ana likes jazz", ANA_DM, origin="extracted")
    assert sorted(m.text for m in (await store.list_memories(ANA_DM)).records) == sorted(facts)
    # a near-duplicate still updates in place, and other scopes are unaffected
    await store.remember("My cat is called Miso.", ANA_DM)
    await store.remember("My favourite band is Radiohead", BOB_DM)
    assert (await store.list_memories(ANA_DM)).total == 3


async def test_extraction_makes_room_only_by_dropping_its_own_picks(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder, config=MemoryConfig(max_per_user=3))
    await store.remember("I'm allergic to peanuts", ANA_DM)
    await store.remember("Ana mentioned a trip to Oslo", ANA_DM, origin="extracted")
    await store.remember("My sister lives in Porto", ANA_DM)
    await store.remember("Ana is learning the cello", ANA_DM, origin="extracted")
    texts = {m.text for m in (await store.list_memories(ANA_DM)).records}
    assert texts == {
        "I'm allergic to peanuts",
        "My sister lives in Porto",
        "Ana is learning the cello",
    }
    # the scope now holds two remembered facts and one extracted: only that one can go
    await store.remember("Ana drives an electric car", ANA_DM, origin="extracted")
    texts = {m.text for m in (await store.list_memories(ANA_DM)).records}
    assert texts == {
        "I'm allergic to peanuts",
        "My sister lives in Porto",
        "Ana drives an electric car",
    }
    with pytest.raises(MemoryFull):
        await store.remember("I take the 8:10 train", ANA_DM)


async def test_caps_differ_by_scope_kind(redis: aioredis.Redis, embedder: Embedder) -> None:
    config = MemoryConfig(max_per_user=1, max_per_chat=2, max_per_team=3)
    store = await open_store(redis, embedder, config=config)
    assert [config.limit_for(s) for s in ("user:t:1", "chat:t:1", "team:t:1")] == [1, 2, 3]
    await store.remember("Deploys happen on Tuesdays", ANA_IN_CHANNEL)
    await store.remember("The channel's wiki page is called Runbook", BOB_IN_CHANNEL)
    with pytest.raises(MemoryFull) as refused:
        await store.remember("Standup is at 9:30", ANA_IN_CHANNEL)
    assert refused.value.scope == "chat:slack:CGENERAL" and refused.value.limit == 2


async def test_the_remember_tool_tells_the_user_when_the_scope_is_full(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder, config=MemoryConfig(max_per_user=1))
    registry = builtin_registry()
    context = ToolContext(run=ANA_DM, memory=store)
    ok = await registry.get("remember")({"text": "I'm vegetarian"}, context)
    assert "Remembered" in ok and "private" in ok
    from agent.tools import ToolError

    with pytest.raises(
        ToolError, match="I can keep 1 memories here; ask me to list them and forget some"
    ):
        await registry.get("remember")({"text": "I live in Lisbon"}, context)


async def test_listing_is_scoped_newest_first_and_paginated(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder, config=MemoryConfig(merge_distance=0.0))
    for n in range(25):
        await store.remember(f"Ana's locker number {n} holds item {n * 7}", ANA_DM)
    await store.remember("Bob's bank PIN hint is his dog's birthday", BOB_DM)
    await store.remember("The team retro is every other Friday", BOB_DM, share="team")
    await store.remember("This channel tracks the Atlas migration", BOB_IN_CHANNEL)

    first = await store.list_memories(ANA_DM, limit=10)
    assert first.total == 26 and first.has_more
    assert first.records[0].text == "The team retro is every other Friday"
    assert first.records[1].text.startswith("Ana's locker number 24")
    last = await store.list_memories(ANA_DM, offset=20, limit=10)
    assert len(last.records) == 6 and not last.has_more
    everything = [
        m.text
        for offset in range(0, 30, 10)
        for m in (await store.list_memories(ANA_DM, offset=offset, limit=10)).records
    ]
    assert len(set(everything)) == 26
    assert not any("Bob's bank" in text or "Atlas" in text for text in everything)

    channel = await store.list_memories(ANA_IN_CHANNEL)
    assert [m.text for m in channel.records] == [
        "This channel tracks the Atlas migration",
        "The team retro is every other Friday",
    ]
    assert [m.scope_label for m in channel.records] == ["channel", "team"]

    tool = builtin_registry().get("list_memories")
    text = await tool({}, ToolContext(run=ANA_DM, memory=store))
    assert "Memories 1-20 of 26:" in text and "list_memories(page=2)" in text
    assert "(team, fact," in text and "Bob's bank" not in text
    page_two = await tool({"page": 2}, ToolContext(run=ANA_DM, memory=store))
    assert "Memories 21-26 of 26:" in page_two and "page=3" not in page_two


async def test_a_generic_question_recalls_the_newest_memories(store: RedisMemoryStore) -> None:
    facts = ["My dog is called Bruno", "I'm allergic to peanuts", "I work at Nordwind as a nurse"]
    for fact in facts:
        await store.remember(fact, ANA_DM)
    await store.remember("Bob supports Benfica", BOB_DM)
    for question in [
        "what do you know about me?",
        "What do you remember about me",
        "tell me what you know about me",
    ]:
        found = await store.recall(question, ANA_DM)
        assert [m.text for m in found] == list(reversed(facts)), question
    assert await store.recall("how do I boil an egg?", ANA_DM) == []
    bob = await store.recall("what do you know about me?", BOB_DM)
    assert [m.text for m in bob] == ["Bob supports Benfica"]


async def test_reindex_keeps_every_memory(redis: aioredis.Redis, embedder: Embedder) -> None:
    config = MemoryConfig(algorithm="flat", merge_distance=0.0)
    store = await open_store(redis, embedder, config=config)
    contexts = [ANA_DM, BOB_DM, ANA_IN_CHANNEL]
    texts = [f"Fact number {n}: the {n}th shelf holds {n * 3} jars" for n in range(149)]
    texts.insert(0, "Ana's passport expires in March")
    for n, text in enumerate(texts):
        await store.remember(text, contexts[n % 3], share="team" if n % 10 == 0 else None)
    before = {key async for key in redis.scan_iter(match="parley:memory:doc:*")}
    assert len(before) == 150

    with pytest.raises(MemoryIndexMismatch, match="hnsw"):
        await open_store(redis, embedder, config=MemoryConfig(algorithm="hnsw"))
    rebuilt = RedisMemoryStore(redis, embedder, config=MemoryConfig(algorithm="hnsw", k=5))
    assert await rebuilt.reindex(batch=64) == 150
    reopened = await open_store(redis, embedder, config=MemoryConfig(algorithm="hnsw"))
    after = {key async for key in redis.scan_iter(match="parley:memory:doc:*")}
    assert after == before
    info = await reopened.index.info()
    assert int(info["num_docs"]) == 150
    seen = set()
    for context in contexts:
        page = await reopened.list_memories(context, limit=100)
        seen |= {m.text for m in page.records}
    assert seen == set(texts)
    found = await reopened.recall("when does my passport run out?", ANA_DM)
    assert found and found[0].text == "Ana's passport expires in March"


def test_the_model_is_checked_before_it_loads(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(RUN_MODEL, copy)
    with copy.open("r+b") as file:  # one flipped byte deep inside the weights
        file.seek(1_000_000)
        byte = file.read(1)
        file.seek(1_000_000)
        file.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingModelError, match=r"SHA-256 .* expected 48788d8d"):
        local_embedder(model_path=copy)
    with pytest.raises(EmbeddingModelError, match=r"cannot read .*python -m memory.model_build"):
        local_embedder(model_path=tmp_path / "missing.onnx")


def test_the_untampered_model_loads_and_embeds() -> None:
    embedder = local_embedder()
    vector = np.asarray(embedder.vectorizer.embed("hello"))
    assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-3


def test_auto_policy_is_exact_for_small_scopes_and_walks_the_graph_for_large_ones() -> None:
    from memory.index import ADHOC_LIMIT, resolve

    assert resolve("auto", 12) == "adhoc_bf"
    assert resolve("auto", ADHOC_LIMIT) == "adhoc_bf"
    assert resolve("auto", ADHOC_LIMIT + 1) == "batches"
    assert resolve("auto", None) is None  # size unknown: RediSearch picks
    assert resolve("batches", 3) == "batches" and resolve("adhoc_bf", 10**6) == "adhoc_bf"


async def test_recall_over_a_large_scope_walks_the_hnsw_graph(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    import memory.index

    store = await open_store(redis, embedder)
    facts = ["The VPN gateway for staging is vpn-stg.example.net", "Lunch is at noon"]
    for fact in facts:
        await store.remember(fact, ANA_DM)
    limit = memory.index.ADHOC_LIMIT
    memory.index.ADHOC_LIMIT = 1  # two memories count as a large scope now
    try:
        found = await store.recall("which host do I connect to for the staging VPN?", ANA_DM)
    finally:
        memory.index.ADHOC_LIMIT = limit
    assert found[0].text == facts[0]


async def test_an_index_from_before_origin_gains_it_and_keeps_its_memories(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    from memory.index import schema

    old = schema("parley", embedder.dims, "hnsw").to_dict()
    old["fields"] = [f for f in old["fields"] if f["name"] != "origin"]
    from redisvl.index import AsyncSearchIndex
    from redisvl.schema import IndexSchema

    await AsyncSearchIndex(IndexSchema.from_dict(old), redis_client=redis).create()
    vector = np.asarray(await embedder.embed("Ana's locker is number 12"), np.float32)
    await redis.hset(
        "parley:memory:doc:old1",
        mapping={
            "id": "old1",
            "text": "Ana's locker is number 12",
            "kind": "fact",
            "scope": ANA_DM.user_scope,
            "author": ANA_DM.user_id,
            "source": "x",
            "created_at": 1.0,
            "last_used_at": 1.0,
            "embedding": vector.tobytes(),
        },
    )
    await redis.hset("parley:memory:meta", mapping={"model": embedder.model_id, "dims": 384})
    store = await open_store(redis, embedder, config=MemoryConfig(max_per_user=1))
    [kept] = (await store.list_memories(ANA_DM)).records
    assert kept.origin == "remembered"
    with pytest.raises(MemoryFull):  # the old memory is protected like a remembered one
        await store.remember("Ana likes figs", ANA_DM, origin="extracted")
    await open_store(redis, embedder)  # reopening is a no-op


async def test_scope_counts_follow_every_change(redis: aioredis.Redis, embedder: Embedder) -> None:
    store = await open_store(redis, embedder, config=MemoryConfig(max_per_user=3))

    async def counts() -> dict[str, int]:
        raw = await redis.hgetall("parley:memory:counts")
        return {k.decode(): int(v) for k, v in raw.items() if int(v)}

    await store.remember("I'm vegetarian", ANA_DM)
    await store.remember("I'm vegetarian.", ANA_DM)  # merged: still one
    await store.remember("Ana's manager is Joaquim", ANA_DM, origin="extracted")
    await store.remember("Ana likes figs", ANA_DM, origin="extracted")
    await store.remember("Ana collects stamps", ANA_DM, origin="extracted")  # evicts one
    await store.remember("Releases go out on Tuesdays", BOB_DM, share="team")
    assert await counts() == {ANA_DM.user_scope: 3, "team:slack:T1": 1}
    assert await store.count(ANA_DM.readable_scopes()) == 4
    mine = (await store.list_memories(ANA_DM)).records
    assert await store.forget(ANA_DM, mine[-1].id) == 1
    assert await store.forget(ANA_DM, mine[-1].id) == 0  # gone already: counted once
    assert await counts() == {ANA_DM.user_scope: 2, "team:slack:T1": 1}
    key = store._key(mine[-2].id)  # two removals racing for one memory count it once
    assert sorted(await asyncio.gather(store.counts.delete([key]), store.counts.delete([key]))) == [
        0,
        1,
    ]
    assert await counts() == {ANA_DM.user_scope: 1, "team:slack:T1": 1}
    assert await store.forget(ANA_DM) == 1
    assert await counts() == {"team:slack:T1": 1}
    await redis.delete("parley:memory:counts")
    assert await store.reindex() == 1
    assert await counts() == {"team:slack:T1": 1}
    assert (await store.list_memories(BOB_DM)).total == 1


@pytest.mark.network
async def test_an_unreachable_ollama_fails_an_embedding_fast() -> None:
    import time

    from memory import ollama_embedder
    from tests.fakes.ollama import FakeOllama

    async with FakeOllama(models=["all-minilm"], dimensions=32) as fake:
        ollama = await ollama_embedder(fake.url, "all-minilm", call_timeout=0.5)
        assert len(await ollama.embed("hello")) == 32
    started = time.monotonic()
    with pytest.raises(TimeoutError):  # RedisVL would retry for minutes
        await ollama.embed("is anyone there?")
    assert time.monotonic() - started < 5
    await ollama.close()
