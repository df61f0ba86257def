"""Long-term memories in one RedisVL index, scoped so nobody reads another person's.

Each memory is a hash: text, kind, scope tag, author, source conversation, origin, created
and last-used times, and its vector; memory/counts.py keeps how many each scope holds, and
memory/recall_cache.py what recall keeps between calls (a non-empty scope's size, last-used
times written together). The index remembers which embedder, dimension and vector algorithm
filled it; a different one at start is refused with the command that moves every memory to
it while Parley runs (`parley memory reindex`, memory/moving.py).

Nothing someone asked Parley to remember is ever dropped to make room: a full scope refuses
new memories (`MemoryFull`) until someone forgets some. Only memories that end-of-run
extraction picked by itself may be evicted, and only to make room for another such pick.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import numpy as np
import redis.asyncio as aioredis
from redisvl.exceptions import RedisSearchError
from redisvl.index import AsyncSearchIndex
from redisvl.query import FilterQuery
from redisvl.query.filter import FilterExpression, Tag

from agent.protocols import (
    SCOPE_LABELS,
    MemoryFull,
    MemoryKind,
    MemoryPage,
    MemoryRecord,
    Origin,
    RunContext,
    Share,
)
from memory import instructions, metrics, provenance
from memory.config import MemoryConfig
from memory.counts import FULL, REPLACED, ScopeCounts, decode
from memory.embedders import Embedder
from memory.generic import GenericQuestions
from memory.index import FIELDS, nearest_query, rank, record, schema
from memory.maintenance import add_origin, wait_indexed
from memory.moving import (
    NOTE_WRITE,
    Generation,
    Keys,
    Progress,
    drain,
    move,
    read,
    record_identity,
    refusal,
    same_space,
)
from memory.recall_cache import RecallCache

log = logging.getLogger(__name__)

MAX_PAGE = 100
INSERT_ATTEMPTS = 3  # concurrent extractions may take each other's victim
FIELDS_VERSION = "2"  # 2: the origin tag


class MemoryIndexMismatch(RuntimeError):
    """The index was built with another embedding model, dimension or algorithm."""


class RedisMemoryStore:
    """The agent's MemoryStore on RedisVL."""

    def __init__(
        self,
        redis: aioredis.Redis,
        embedder: Embedder,
        *,
        prefix: str = "parley",
        config: MemoryConfig = MemoryConfig(),
    ) -> None:
        self.redis = redis
        self.embedder = embedder
        self.prefix = prefix
        self.config = config
        self.keys = Keys(prefix)
        self.meta_key = self.keys.meta
        self.generation = Generation.of(prefix, 0)
        self.index = self.index_for(self.generation)
        self._note = redis.register_script(NOTE_WRITE)
        self.counts = ScopeCounts(redis, prefix)
        self.generic = GenericQuestions(embedder, config.generic_distance)
        self.cache = RecallCache(redis, self.count)

    def identity(self) -> dict[str, str]:
        """What made the vectors: recorded with the index, compared at every start."""
        return {
            "model": self.embedder.model_id,
            "dims": str(self.embedder.dims),
            "algorithm": self.config.algorithm,
            "embedder": self.embedder.name,
            "fields": FIELDS_VERSION,
        }

    def index_for(self, generation: Generation) -> AsyncSearchIndex:
        return AsyncSearchIndex(
            schema(
                self.prefix,
                self.embedder.dims,
                self.config.algorithm,
                name=generation.index,
                vector=generation.vector,
            ),
            redis_client=self.redis,
        )

    def use(self, generation: Generation) -> None:
        self.generation = generation
        self.index = self.index_for(generation)

    async def open(self) -> RedisMemoryStore:
        """Create the index if missing; refuse one built for another model or algorithm."""
        meta = await read(self.redis, self.meta_key)
        wanted = self.identity()
        if meta:
            found = {**meta, "algorithm": meta.get("algorithm", "hnsw")}
            if not same_space(found, wanted):
                underway = await read(self.redis, self.keys.moving)
                raise MemoryIndexMismatch(refusal(found, wanted, underway))
        self.use(Generation.recorded(self.prefix, meta))
        if not await self.index.exists():
            try:
                await self.index.create(overwrite=False)
            except RedisSearchError:
                if not await self.index.exists():  # not another process winning the race
                    raise
        elif meta.get("fields") != FIELDS_VERSION:
            await add_origin(self.redis, self.index)
        if meta.get("fields") != FIELDS_VERSION:
            await self.counts.recount()  # counts arrived with this version
        if not await record_identity(self.redis, self.keys, self.generation, wanted):
            return await self.open()  # a move switched meanwhile: look again
        # memories a process still on the old index wrote after a move switched
        moving = await self.redis.exists(self.keys.moving)
        if not moving and (stored := await drain(self, self.generation)):
            log.info("memory: %d memories written on the old index embedded", stored)
        return self

    def _key(self, memory_id: str) -> str:
        return f"{self.prefix}:memory:doc:{memory_id}"

    async def count(self, scopes: list[str]) -> int:
        """How many memories these scopes hold."""
        return await self.counts.count(scopes)

    # --- recall -----------------------------------------------------------------------------

    async def recall(
        self, query: str, context: RunContext, k: int | None = None
    ) -> list[MemoryRecord]:
        """This conversation's standing instructions, then the memories relevant to `query`;
        for a generic question ("what do you know about me?") the newest ones."""
        k = k or self.config.k
        scopes = context.readable_scopes()
        # Most conversations start with nothing to remember: counting is far cheaper than
        # embedding the query only to find no neighbours. Instructions are memories of the
        # conversation's own scope, which is readable, so none are missed.
        size = await self.cache.size(scopes)
        if not size:
            return []
        if not self.generic.phrased(query):
            vector = await self.embedder.embed_query(query)
            if not await self.generic.matches(vector):
                return await self._relevant(vector, context, scopes, k, size)
        standing = await instructions.standing(self, context)
        newest = (await self._page(scopes, 0, k)).records
        return standing + [m for m in newest if m.kind != "instruction"]

    async def _relevant(
        self, vector: list[float], context: RunContext, scopes: list[str], k: int, size: int
    ) -> list[MemoryRecord]:
        # A recency bonus can lift a farther memory into the top k; without one, k is enough.
        wanted = k * 2 if self.config.recency_weight else k
        policy, field = self.config.hybrid_policy, self.generation.vector
        near = nearest_query(vector, scopes, wanted, policy, size, vector_field=field)
        # the instructions and the neighbours in one round trip
        standing, found = await self.index.batch_query([instructions.standing_query(context), near])
        chosen = self.rank(found, k, time.time())
        await self.cache.used({self._key(record.id): record.last_used_at for record in chosen})
        await provenance.note_used(self.redis, self.prefix, context, chosen)
        return [record(doc) for doc in standing] + [m for m in chosen if m.kind != "instruction"]

    async def write_used(self) -> None:
        """Write the last-used times recall noted and has not written yet."""
        await self.cache.write_used()

    def rank(self, found: list[dict[str, Any]], k: int, now: float) -> list[MemoryRecord]:
        return rank(found, k, now, self.config)

    async def nearest(
        self,
        vector: list[float],
        scopes: list[str],
        k: int,
        size: int | None = None,
        author: str | None = None,
    ) -> list[dict[str, Any]]:
        """The k memories of these scopes closest to the vector (`size`: how many they hold),
        only `author`'s when given."""
        policy, field = self.config.hybrid_policy, self.generation.vector
        return await self.index.query(nearest_query(vector, scopes, k, policy, size, author, field))

    # --- writing ----------------------------------------------------------------------------

    async def remember(
        self,
        text: str,
        context: RunContext,
        *,
        kind: MemoryKind = "fact",
        share: Share | None = None,
        origin: Origin = "remembered",
    ) -> MemoryRecord:
        text = text.strip()
        scope = context.write_scope(share)
        vector = await self.embedder.embed(text)
        now = time.time()
        # Only the writer's own near-duplicate is updated: a memory has one author, and
        # someone else's (a channel's IBAN, say) is never rewritten or taken over by a merge.
        closest = await self.nearest(vector, [scope], 1, author=context.user_id)
        mapping: dict[Any, Any] = {
            "text": text,
            "kind": kind,
            "scope": scope,
            "author": context.user_id,
            "source": context.conversation_id,
            "created_at": now,
            "last_used_at": now,
            "author_name": context.user_name,
            self.generation.vector: np.asarray(vector, dtype=np.float32).tobytes(),
        }
        if closest and float(closest[0]["vector_distance"]) <= self.config.merge_distance:
            existing = record(closest[0])
            memory_id = existing.id
            if existing.origin == "remembered":
                origin = "remembered"  # asked for once: stays protected
            mapping.update(id=memory_id, origin=origin)
            # The stored time stays: a search returns it rounded to 10 ms, and writing that
            # back could move the memory after one written just after it.
            del mapping["created_at"]
            created_at = existing.created_at
            await self.index.load([mapping], keys=[self._key(memory_id)])
            log.info("memory %s updated instead of duplicated", memory_id)
        else:
            memory_id = uuid.uuid4().hex[:12]
            created_at = now
            mapping.update(id=memory_id, origin=origin)
            await self._insert(scope, mapping, origin)
        await self.noted(self._key(memory_id))
        return MemoryRecord(
            id=memory_id,
            text=text,
            kind=kind,
            scope=scope,
            author=context.user_id,
            source_conversation=context.conversation_id,
            created_at=created_at,
            last_used_at=now,
            origin=origin,
        )

    async def _insert(self, scope: str, mapping: dict[str, Any], origin: Origin) -> None:
        """Store a new memory unless its scope is full. The check, the write and the count
        happen in one script, so concurrent writers cannot overshoot the limit; an extracted
        memory may take the place of the least used extracted one, in the same script."""
        limit = self.config.limit_for(scope)
        label = _label(scope)
        key = self._key(str(mapping["id"]))
        victim: str | None = None
        for _ in range(INSERT_ATTEMPTS):
            done = await self.counts.insert(key, scope, limit, mapping, victim)
            if done == REPLACED:
                metrics.EVICTED.labels(label).inc()
                log.info("a full %s scope dropped its least used extracted memory", label)
            if done != FULL:
                return
            if origin != "extracted":
                break
            victim = await self._least_used_extracted(scope)
            if victim is None:
                break
        metrics.FULL.labels(label).inc()
        log.warning("a %s memory scope is full (%d memories); refused a new one", label, limit)
        raise MemoryFull(scope, limit)

    async def _least_used_extracted(self, scope: str) -> str | None:
        """The key of the scope's least recently used extracted memory, if it has one."""
        oldest = await self.index.query(
            FilterQuery(
                filter_expression=(Tag("scope") == scope) & (Tag("origin") == "extracted"),
                return_fields=["id"],
                num_results=1,
                sort_by=("last_used_at", "ASC"),
            )
        )
        return self._key(str(oldest[0]["id"]).rsplit(":", 1)[-1]) if oldest else None

    # --- what people can see and remove ---------------------------------------------------

    async def list_memories(
        self, context: RunContext, *, offset: int = 0, limit: int = 20
    ) -> MemoryPage:
        return await self._page(context.readable_scopes(), offset, limit)

    async def _page(self, scopes: list[str], offset: int, limit: int) -> MemoryPage:
        offset, limit = max(0, offset), max(1, min(limit, MAX_PAGE))
        in_scopes = Tag("scope") == scopes
        query = FilterQuery(
            filter_expression=in_scopes,
            return_fields=FIELDS,
            num_results=limit,
            sort_by=("created_at", "DESC"),
        ).paging(offset, limit)
        found = await self.index.query(query)
        total = await self.count(scopes)
        return MemoryPage(records=[record(doc) for doc in found], total=total, offset=offset)

    def _removable(self, context: RunContext) -> FilterExpression:
        """Visible here, and either private to this user or written by them."""
        return (Tag("scope") == context.readable_scopes()) & (
            (Tag("author") == context.user_id) | (Tag("scope") == context.user_scope)
        )

    async def removable(self, context: RunContext, memory_id: str) -> MemoryRecord | None:
        fields = [name for name in FIELDS if name != "id"]  # not the vector
        values = await self.redis.hmget(self._key(memory_id), fields)
        doc = {name: decode(v) for name, v in zip(fields, values, strict=True) if v is not None}
        if not doc.get("scope") or not self._mine(context, doc["scope"], doc.get("author", "")):
            return None
        return record({**doc, "id": memory_id})

    @staticmethod
    def _mine(context: RunContext, scope: str, author: str) -> bool:
        visible = scope in context.readable_scopes()
        return visible and (author == context.user_id or scope == context.user_scope)

    async def forget(self, context: RunContext, memory_id: str | None = None) -> int:
        removable = self._removable(context)
        if memory_id is not None:
            # two fields, not the whole hash with its vector
            found = await self.redis.hmget(self._key(memory_id), ["scope", "author"])
            scope, author = (decode(v) if v is not None else "" for v in found)
            if not self._mine(context, scope, author):
                return 0
            return await self.counts.delete([self._key(memory_id)])
        removed = 0
        query = FilterQuery(filter_expression=removable, return_fields=["id"], num_results=MAX_PAGE)
        while True:  # each round deletes what it found, so the next starts at the top again
            found = await self.index.query(query)
            if not found:
                return removed
            keys = [self._key(str(doc["id"]).rsplit(":", 1)[-1]) for doc in found]
            removed += await self.counts.delete(keys)

    # --- maintenance ------------------------------------------------------------------------

    async def embed_memory(self, text: str) -> dict[str, Any]:
        """A memory's vector, under the field the active index reads."""
        vector = await self.embedder.embed(text)
        return {self.generation.vector: np.asarray(vector, dtype=np.float32).tobytes()}

    async def correct(self, context: RunContext, memory_id: str, text: str) -> MemoryRecord | None:
        return await provenance.correct(self, context, memory_id, text)

    async def used(self, context: RunContext) -> list[MemoryRecord]:
        return await provenance.used(self, context)

    async def recalled(self, context: RunContext) -> list[MemoryRecord]:
        return await provenance.recalled(self, context)

    async def instructions(self, context: RunContext) -> list[MemoryRecord]:
        return await instructions.standing(self, context)

    async def noted(self, key: str) -> None:
        """A memory just written: noted for the index a move builds, or for the active one
        when this process still writes to an index a move retired."""
        await self._note(
            keys=[self.meta_key, self.keys.moving, self.keys.dirty], args=[self.index.name, key]
        )

    async def reindex(self, batch: int = 64, progress: Progress | None = None) -> int:
        """Move every memory to this embedder while Parley runs (memory/moving.py); how many
        were embedded."""
        total = await move(self, batch, progress)
        await wait_indexed(self.index)
        return total


def _label(scope: str) -> str:
    return SCOPE_LABELS.get(scope.split(":", 1)[0], "team")
