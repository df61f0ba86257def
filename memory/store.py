"""Long-term memories in one RedisVL index, scoped so nobody reads another person's.

Each memory is a hash: text, kind, scope tag, author, source conversation, created and
last-used times, and its vector (HNSW, cosine). The index remembers which embedding model
filled it; a different model or dimension at start is refused with the command that
rebuilds it (`parley memory reindex`).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from typing import Any

import numpy as np
import redis.asyncio as aioredis
from redisvl.exceptions import RedisSearchError
from redisvl.index import AsyncSearchIndex
from redisvl.query import CountQuery, FilterQuery, VectorQuery
from redisvl.query.filter import Tag
from redisvl.schema import IndexSchema

from agent.protocols import MemoryKind, MemoryRecord, RunContext, Share
from memory.embedders import Embedder

log = logging.getLogger(__name__)

FIELDS = ["id", "text", "kind", "scope", "author", "source", "created_at", "last_used_at"]
RECENCY_WEIGHT = 0.05  # at most this much distance is forgiven to a memory used just now
RECENCY_DAYS = 30.0


class MemoryIndexMismatch(RuntimeError):
    """The index was built with another embedding model or dimension."""


def schema(prefix: str, dims: int) -> IndexSchema:
    return IndexSchema.from_dict(
        {
            "index": {
                "name": f"{prefix}:memory",
                "prefix": f"{prefix}:memory:doc",
                "storage_type": "hash",
            },
            "fields": [
                {"name": "text", "type": "text"},
                {"name": "kind", "type": "tag"},
                {"name": "scope", "type": "tag", "attrs": {"separator": "|"}},
                {"name": "author", "type": "tag", "attrs": {"separator": "|"}},
                {"name": "source", "type": "tag", "attrs": {"separator": "|"}},
                {"name": "created_at", "type": "numeric", "attrs": {"sortable": True}},
                {"name": "last_used_at", "type": "numeric", "attrs": {"sortable": True}},
                {
                    "name": "embedding",
                    "type": "vector",
                    "attrs": {
                        "dims": dims,
                        "algorithm": "hnsw",
                        "distance_metric": "cosine",
                        "datatype": "float32",
                    },
                },
            ],
        }
    )


def _record(doc: dict[str, Any], distance: float | None = None) -> MemoryRecord:
    return MemoryRecord(
        id=str(doc["id"]).rsplit(":", 1)[-1],
        text=str(doc["text"]),
        kind=doc.get("kind") or "fact",  # type: ignore[arg-type]
        scope=str(doc["scope"]),
        author=str(doc.get("author") or ""),
        source_conversation=str(doc.get("source") or ""),
        created_at=float(doc.get("created_at") or 0),
        last_used_at=float(doc.get("last_used_at") or 0),
        distance=distance,
    )


class RedisMemoryStore:
    """The agent's MemoryStore on RedisVL."""

    def __init__(
        self,
        redis: aioredis.Redis,
        embedder: Embedder,
        *,
        prefix: str = "parley",
        k: int = 5,
        max_distance: float = 0.75,
        merge_distance: float = 0.1,
        max_per_scope: int = 1000,
    ) -> None:
        self.redis = redis
        self.embedder = embedder
        self.prefix = prefix
        self.k = k
        self.max_distance = max_distance
        self.merge_distance = merge_distance
        self.max_per_scope = max_per_scope
        self.index = AsyncSearchIndex(schema(prefix, embedder.dims), redis_client=redis)
        self.meta_key = f"{prefix}:memory:meta"

    async def open(self) -> RedisMemoryStore:
        """Create the index if missing; refuse one built for another embedding model."""
        meta = {_text(k): _text(v) for k, v in (await self.redis.hgetall(self.meta_key)).items()}
        if meta:
            model = meta.get("model", "")
            dims = int(meta.get("dims", "0"))
            if (model, dims) != (self.embedder.model_id, self.embedder.dims):
                raise MemoryIndexMismatch(
                    f"the memory index holds {model} vectors ({dims}-d), but the configured "
                    f"embedder is {self.embedder.model_id} ({self.embedder.dims}-d); "
                    "run `parley memory reindex` to rebuild it"
                )
        if not await self.index.exists():
            try:
                await self.index.create(overwrite=False)
            except RedisSearchError:
                if not await self.index.exists():  # not another process winning the race
                    raise
        await self.redis.hset(
            self.meta_key, mapping={"model": self.embedder.model_id, "dims": self.embedder.dims}
        )
        return self

    def _key(self, memory_id: str) -> str:
        return f"{self.prefix}:memory:doc:{memory_id}"

    # --- recall -----------------------------------------------------------------------------

    async def recall(
        self, query: str, context: RunContext, k: int | None = None
    ) -> list[MemoryRecord]:
        k = k or self.k
        scopes = context.readable_scopes()
        # Most conversations start with nothing to remember: counting is far cheaper than
        # embedding the query only to find no neighbours.
        if not await self.index.query(CountQuery(filter_expression=Tag("scope") == scopes)):
            return []
        vector = await self.embedder.embed(query)
        found = await self.nearest(vector, scopes, k * 2)
        now = time.time()
        ranked = []
        for doc in found:
            distance = float(doc["vector_distance"])
            if distance > self.max_distance:
                continue
            age_days = max(0.0, now - float(doc.get("last_used_at") or 0)) / 86_400
            score = distance - RECENCY_WEIGHT * math.exp(-age_days / RECENCY_DAYS)
            ranked.append((score, _record(doc, distance)))
        ranked.sort(key=lambda pair: pair[0])
        chosen = [record for _, record in ranked[:k]]
        if chosen:
            async with self.redis.pipeline(transaction=False) as pipe:
                for record in chosen:
                    pipe.hset(self._key(record.id), "last_used_at", now)
                await pipe.execute()
        return chosen

    async def nearest(self, vector: list[float], scopes: list[str], k: int) -> list[dict[str, Any]]:
        """The k memories of these scopes closest to the vector.

        Retention caps every scope, so the scopes' memories are few: comparing the vector with
        each of them (ad hoc brute force) is exact and stays fast however large the index
        grows, where walking the HNSW graph under a selective filter gets slower with it.
        """
        return await self.index.query(
            VectorQuery(
                vector=vector,
                vector_field_name="embedding",
                return_fields=FIELDS,
                filter_expression=Tag("scope") == scopes,
                num_results=k,
                hybrid_policy="ADHOC_BF",
            )
        )

    # --- writing ----------------------------------------------------------------------------

    async def remember(
        self,
        text: str,
        context: RunContext,
        *,
        kind: MemoryKind = "fact",
        share: Share = "private",
    ) -> MemoryRecord:
        text = text.strip()
        scope = context.write_scope(share)
        vector = await self.embedder.embed(text)
        now = time.time()
        nearest = await self.nearest(vector, [scope], 1)
        if nearest and float(nearest[0]["vector_distance"]) <= self.merge_distance:
            existing = _record(nearest[0])
            memory_id, created = existing.id, existing.created_at
            log.info("memory %s updated instead of duplicated", memory_id)
        else:
            memory_id, created = uuid.uuid4().hex[:12], now
        await self.redis.hset(
            self._key(memory_id),
            mapping={
                "id": memory_id,
                "text": text,
                "kind": kind,
                "scope": scope,
                "author": context.user_id,
                "source": context.conversation_id,
                "created_at": created,
                "last_used_at": now,
                "embedding": np.asarray(vector, dtype=np.float32).tobytes(),
            },
        )
        await self._enforce_retention(scope)
        return MemoryRecord(
            id=memory_id,
            text=text,
            kind=kind,
            scope=scope,
            author=context.user_id,
            source_conversation=context.conversation_id,
            created_at=created,
            last_used_at=now,
        )

    async def _enforce_retention(self, scope: str) -> None:
        in_scope = Tag("scope") == scope
        count = await self.index.query(CountQuery(filter_expression=in_scope))
        excess = int(count) - self.max_per_scope
        if excess <= 0:
            return
        oldest = await self.index.query(
            FilterQuery(
                filter_expression=in_scope,
                return_fields=["id"],
                num_results=excess,
                sort_by=("last_used_at", "ASC"),
            )
        )
        keys = [self._key(str(doc["id"]).rsplit(":", 1)[-1]) for doc in oldest]
        if keys:
            await self.redis.delete(*keys)
            log.info("evicted %d least recently used memories from %s", len(keys), scope)

    # --- what people can see and remove ---------------------------------------------------

    async def list_memories(self, context: RunContext) -> list[MemoryRecord]:
        found = await self.index.query(
            FilterQuery(
                filter_expression=(Tag("scope") == context.readable_scopes())
                & (Tag("author") == context.user_id),
                return_fields=FIELDS,
                num_results=1000,
                sort_by=("created_at", "ASC"),
            )
        )
        return [_record(doc) for doc in found]

    async def forget(self, context: RunContext, memory_id: str | None = None) -> int:
        mine = await self.list_memories(context)
        chosen = [m for m in mine if memory_id is None or m.id == memory_id]
        if chosen:
            await self.redis.delete(*(self._key(m.id) for m in chosen))
        return len(chosen)

    # --- maintenance ------------------------------------------------------------------------

    async def reindex(self) -> int:
        """Rebuild the index for the configured embedder, re-embedding every memory."""
        keys = [key async for key in self.redis.scan_iter(match=f"{self.prefix}:memory:doc:*")]
        await self.redis.execute_command("FT.DROPINDEX", self.index.name)  # documents stay
        texts = [await self.redis.hget(key, "text") for key in keys]
        pairs = [(k, _text(t)) for k, t in zip(keys, texts, strict=True) if t is not None]
        for start in range(0, len(pairs), 64):
            batch = pairs[start : start + 64]
            vectors = await self.embedder.embed_many([text for _, text in batch])
            async with self.redis.pipeline(transaction=False) as pipe:
                for (key, _), vector in zip(batch, vectors, strict=True):
                    pipe.hset(key, "embedding", np.asarray(vector, dtype=np.float32).tobytes())
                await pipe.execute()
        await self.redis.delete(self.meta_key)
        await self.index.create(overwrite=True)
        await self.redis.hset(
            self.meta_key, mapping={"model": self.embedder.model_id, "dims": self.embedder.dims}
        )
        return len(pairs)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
