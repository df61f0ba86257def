"""Memory recall at scale: KNN-5 with a scope filter at 10k / 100k (and 1M) memories, and
embed + KNN for real sentences at 100k, on a throwaway Redis Stack.

Vectors for the load are random unit vectors (the KNN cost does not depend on meaning);
each memory gets one of 1,000 user scopes. 1M takes a long while to index on 2 cores:
set PARLEY_BENCH_1M=1 to include it.
"""

from __future__ import annotations

import asyncio
import os
import time

import numpy as np
import redis.asyncio as aioredis

from agent.protocols import RunContext
from bench.support import describe, throwaway_redis
from memory import RedisMemoryStore, local_embedder

SCOPES = 1000
QUERIES = 300
SENTENCES = [
    "what did I say about my allergies?",
    "when is the team offsite?",
    "which restaurant did Ana recommend?",
    "remind me what the deploy policy is",
    "what's my manager's name?",
]


async def load(redis: aioredis.Redis, store: RedisMemoryStore, start: int, stop: int) -> None:
    rng = np.random.default_rng(start)
    batch = 1000
    for first in range(start, stop, batch):
        vectors = rng.standard_normal((min(batch, stop - first), store.embedder.dims)).astype(
            np.float32
        )
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        async with redis.pipeline(transaction=False) as pipe:
            for offset, vector in enumerate(vectors):
                index = first + offset
                pipe.hset(
                    f"parley:memory:doc:{index}",
                    mapping={
                        "id": str(index),
                        "text": f"memory {index}",
                        "kind": "fact",
                        "scope": f"user:slack:U{index % SCOPES}",
                        "author": f"U{index % SCOPES}",
                        "source": "bench",
                        "created_at": time.time(),
                        "last_used_at": time.time(),
                        "embedding": vector.tobytes(),
                    },
                )
            await pipe.execute()


async def wait_indexed(store: RedisMemoryStore, expected: int) -> None:
    while True:
        info = await store.index.info()
        if int(info["num_docs"]) >= expected and str(info.get("indexing")) in ("0", "0.0"):
            return
        await asyncio.sleep(0.5)


async def index_memory(store: RedisMemoryStore, redis: aioredis.Redis) -> str:
    info = await store.index.info()
    vector_mb = float(info.get("vector_index_sz_mb", 0) or 0)
    total = await redis.info("memory")
    return f"vector index {vector_mb:.0f} MB, Redis used {total['used_memory'] / 2**20:.0f} MB"


async def knn(store: RedisMemoryStore, rng: np.random.Generator) -> list[float]:
    """The store's own scoped nearest-neighbour query, as recall runs it after embedding."""
    timings = []
    for i in range(QUERIES):
        vector = rng.standard_normal(store.embedder.dims).astype(np.float32)
        vector /= np.linalg.norm(vector)
        scopes = [f"user:slack:U{i % SCOPES}", "team:slack:T1"]
        started = time.perf_counter()
        await store.nearest(vector.tolist(), scopes, 5)
        timings.append(time.perf_counter() - started)
    return timings


async def main() -> None:
    sizes = [10_000, 100_000] + ([1_000_000] if os.environ.get("PARLEY_BENCH_1M") else [])
    embedder = local_embedder()
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url, socket_timeout=120)
        store = await RedisMemoryStore(redis, embedder).open()
        rng = np.random.default_rng(7)
        loaded = 0
        for size in sizes:
            started = time.perf_counter()
            await load(redis, store, loaded, size)
            await wait_indexed(store, size)
            loaded = size
            print(
                f"{size:>9,} memories (loaded in {time.perf_counter() - started:.0f} s): "
                f"KNN-5 with scope filter {describe(await knn(store, rng))}; {await index_memory(store, redis)}"
            )
            if size == 100_000:
                context = RunContext(
                    conversation_id="c", platform="slack", user_id="U7", chat_id="D7", team_id="T1"
                )
                timings = []
                for i in range(QUERIES):
                    sentence = f"{SENTENCES[i % len(SENTENCES)]} ({i})"  # defeat the query cache
                    started = time.perf_counter()
                    await store.recall(sentence, context)
                    timings.append(time.perf_counter() - started)
                print(
                    f"{size:>9,} memories: embed + KNN (recall of a new sentence) {describe(timings)}"
                )
        await redis.aclose()
    print("targets: KNN p95 <= 5 ms at 1M; embed + KNN p95 <= 15 ms at 100k")
