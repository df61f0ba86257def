"""Rebuilding the memory index: for another embedding model or vector algorithm
(`parley memory reindex`), or for a schema that gained a field since it was built."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import redis.asyncio as aioredis
from redisvl.index import AsyncSearchIndex

from memory.counts import ScopeCounts, decode
from memory.embedders import Embedder

log = logging.getLogger(__name__)


async def add_origin(redis: aioredis.Redis, index: AsyncSearchIndex) -> None:
    """Indexes from before `origin` existed gain the field in place; their memories have
    none, which counts as remembered (never evicted). RedisVL cannot alter an index."""
    try:
        await redis.execute_command("FT.ALTER", index.name, "SCHEMA", "ADD", "origin", "TAG")
        log.info("memory index %s gained the origin field", index.name)
    except aioredis.ResponseError as exc:
        if "duplicate" not in str(exc).lower():
            raise


async def reindex(
    index: AsyncSearchIndex, embedder: Embedder, counts: ScopeCounts, batch: int = 64
) -> int:
    """Rebuild the index for this embedder, re-embedding every memory; the documents
    themselves are never deleted. They are found by scanning, since the index is gone."""
    if await index.exists():
        await index.delete(drop=False)
    redis = counts.redis
    keys = [decode(key) async for key in redis.scan_iter(match=counts.docs)]
    total = 0
    for start in range(0, len(keys), batch):
        chunk = keys[start : start + batch]
        async with redis.pipeline(transaction=False) as pipe:
            for key in chunk:
                pipe.hget(key, "text")
            texts = await pipe.execute()
        present = [(key, decode(text)) for key, text in zip(chunk, texts, strict=True) if text]
        if not present:
            continue
        vectors = await embedder.embed_many([text for _, text in present])
        await index.load(
            [{"embedding": np.asarray(vector, dtype=np.float32).tobytes()} for vector in vectors],
            keys=[key for key, _ in present],
        )
        total += len(present)
    await index.create(overwrite=True)
    await counts.recount()
    await wait_indexed(index)
    return total


async def wait_indexed(index: AsyncSearchIndex, poll: float = 0.2) -> None:
    """Wait for RediSearch's background scan of existing documents: until it ends, recall
    would miss memories. It announces nothing, so ask it."""
    while True:
        info = await index.info()
        if float(info.get("percent_indexed", 1)) >= 1 and not int(info.get("indexing", 0)):
            return
        await asyncio.sleep(poll)
