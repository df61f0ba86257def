"""Moving every memory to another embedder while Parley runs (`parley memory reindex`).

Each index is a generation: a RediSearch index over the same memory hashes, reading its own
vector field (`embedding` for the first, `embedding_g<n>` after). A move builds the next
generation beside the active one:

1. `memory:moving` records the target (its embedder and index); a run that finds it resumes.
2. Every memory gains the target's vector; those that have it already are skipped.
3. Memories written while the move runs land in the active index at once (the running
   service embeds them with its own model) and are noted in `memory:dirty` by every writer
   (`NOTE_WRITE`); the move embeds them for the target too.
4. The switch is one script: with nothing left noted, the meta hash names the new index and
   the old one is recorded as retired. A writer that noted a memory just before blocks it;
   the move embeds that one and tries again.
5. The retired index is dropped and its vector field deleted from every memory.

A vector is stored only while its memory still holds the text it was computed from
(`STORE_VECTORS`), so a memory changed or deleted meanwhile is never given a stale vector;
it stays noted and is embedded again. Every step can be cut off (kill -9) and run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import redis.asyncio as aioredis
from redisvl.index import AsyncSearchIndex

from memory.counts import ScopeCounts
from memory.embedders import Embedder
from memory.index import VECTOR
from replies import as_text

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # memories looked at, memories in all
SWITCH_ROUNDS = 50  # writers keep noting memories faster than they are embedded: give up

# KEYS: meta, moving, dirty; ARGV: the writer's index, the memory's key.
NOTE_WRITE = """
local active = redis.call('HGET', KEYS[1], 'index')
if redis.call('EXISTS', KEYS[2]) == 1 or (active and active ~= ARGV[1]) then
  redis.call('SADD', KEYS[3], ARGV[2])
  return 1
end
return 0
"""

# KEYS: dirty, then memories; ARGV: the vector field, then (text, vector) per memory.
# A vector goes only where its text still is; a memory gone is no longer noted.
STORE_VECTORS = """
local stored = 0
for i = 2, #KEYS do
  local j = 2 * (i - 1)
  if redis.call('HGET', KEYS[i], 'text') == ARGV[j] then
    redis.call('HSET', KEYS[i], ARGV[1], ARGV[j + 1])
    redis.call('SREM', KEYS[1], KEYS[i])
    stored = stored + 1
  elseif redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('SREM', KEYS[1], KEYS[i])
  end
end
return stored
"""

# KEYS: meta, moving, dirty, retired; ARGV: the old index and field, then the new meta.
SWITCH = """
if redis.call('SCARD', KEYS[3]) > 0 then
  return 0
end
redis.call('HSET', KEYS[4], 'index', ARGV[1], 'vector', ARGV[2])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('DEL', KEYS[2])
return 1
"""


# KEYS: meta; ARGV: the index the opener found, then the meta to record. Refused when a
# switch named another index since.
RECORD = """
local index = redis.call('HGET', KEYS[1], 'index')
if index and index ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
"""


class MoveStalled(RuntimeError):
    """Writers noted memories faster than the move could embed them, SWITCH_ROUNDS times."""


@dataclass(frozen=True, kw_only=True)
class Generation:
    """One index over the memories and the hash field its vectors live in."""

    number: int
    index: str
    vector: str

    @classmethod
    def of(cls, prefix: str, number: int) -> Generation:
        if number == 0:
            return cls(number=0, index=f"{prefix}:memory", vector=VECTOR)
        return cls(number=number, index=f"{prefix}:memory:g{number}", vector=f"{VECTOR}_g{number}")

    @classmethod
    def recorded(cls, prefix: str, fields: dict[str, str]) -> Generation:
        """The generation a meta or moving hash names (none named: the first)."""
        return cls.of(prefix, int(fields.get("generation") or 0))

    def fields(self) -> dict[str, str]:
        return {"generation": str(self.number), "index": self.index, "vector": self.vector}


@dataclass(frozen=True)
class Keys:
    prefix: str

    @property
    def meta(self) -> str:
        return f"{self.prefix}:memory:meta"

    @property
    def moving(self) -> str:
        return f"{self.prefix}:memory:moving"

    @property
    def dirty(self) -> str:
        return f"{self.prefix}:memory:dirty"

    @property
    def retired(self) -> str:
        return f"{self.prefix}:memory:retired"

    @property
    def docs(self) -> str:
        return f"{self.prefix}:memory:doc:*"


class Store(Protocol):
    """What a move needs of the store it moves (memory.store.RedisMemoryStore)."""

    redis: aioredis.Redis
    keys: Keys
    embedder: Embedder
    counts: ScopeCounts

    def identity(self) -> dict[str, str]: ...

    def index_for(self, generation: Generation) -> AsyncSearchIndex: ...

    def use(self, generation: Generation) -> None: ...


async def read(redis: aioredis.Redis, key: str) -> dict[str, str]:
    return {as_text(k): as_text(v) for k, v in (await redis.hgetall(key)).items()}


IDENTITY = ("model", "dims", "algorithm")


def same_space(found: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(found.get(key) == wanted.get(key) for key in IDENTITY)


async def record_identity(
    redis: aioredis.Redis, keys: Keys, generation: Generation, identity: dict[str, str]
) -> bool:
    """Record what fills the active index, unless a switch named another one meanwhile."""
    fields = [item for pair in {**identity, **generation.fields()}.items() for item in pair]
    script = redis.register_script(RECORD)
    return bool(await script(keys=[keys.meta], args=[generation.index, *fields]))


def refusal(found: dict[str, str], wanted: dict[str, str], moving: dict[str, str]) -> str:
    """Why a store may not open on this index, and the command that fixes it: one line."""
    if moving and same_space(moving, wanted):
        return (
            f"the memory index is moving to {wanted['model']}: let `parley memory reindex` "
            "finish (run it again if it stopped), then start"
        )
    return (
        f"the memory index holds {found.get('model')} vectors ({found.get('dims')}-d, "
        f"{found['algorithm']}), but the configuration asks for {wanted['model']} "
        f"({wanted['dims']}-d, {wanted['algorithm']}); "
        "run `parley memory reindex` to move every memory to it"
    )


async def memory_keys(redis: aioredis.Redis, keys: Keys) -> list[str]:
    return [as_text(key) async for key in redis.scan_iter(match=keys.docs, count=1000)]


async def embed_into(store: Store, generation: Generation, pairs: list[tuple[str, str]]) -> int:
    """Embed these (key, text) memories for `generation`; stored only where the text is
    unchanged, and their notes cleared. How many were stored."""
    if not pairs:
        return 0
    vectors = await store.embedder.embed_many([text for _, text in pairs])
    args: list[str | bytes] = [generation.vector]
    for (_, text), vector in zip(pairs, vectors, strict=True):
        args += [text, np.asarray(vector, dtype=np.float32).tobytes()]
    script = store.redis.register_script(STORE_VECTORS)
    return int(await script(keys=[store.keys.dirty, *[key for key, _ in pairs]], args=args))


async def drain(store: Store, generation: Generation, batch: int = 64) -> int:
    """Embed the memories writers noted, until none is left; how many were stored."""
    stored = 0
    redis = store.redis
    for _ in range(10_000):  # bounded: each round clears what it embedded
        members = await redis.srandmember(store.keys.dirty, batch)
        noted = [as_text(key) for key in members or []]  # type: ignore[union-attr,arg-type]
        if not noted:
            return stored
        async with redis.pipeline(transaction=False) as pipe:
            for key in noted:
                pipe.hget(key, "text")
            texts = await pipe.execute()
        gone = [key for key, text in zip(noted, texts, strict=True) if text is None]
        if gone:
            await redis.srem(store.keys.dirty, *gone)
        stored += await embed_into(
            store, generation, [(k, as_text(t)) for k, t in zip(noted, texts, strict=True) if t]
        )
    return stored


async def remove_generation(redis: aioredis.Redis, keys: Keys, generation: Generation) -> None:
    """Drop an index (never its memories) and delete its vectors from every memory."""
    try:
        await redis.execute_command("FT.DROPINDEX", generation.index)
    except aioredis.ResponseError as exc:
        if "unknown index" not in str(exc).lower() and "no such index" not in str(exc).lower():
            raise
    found = await memory_keys(redis, keys)
    for start in range(0, len(found), 1000):
        async with redis.pipeline(transaction=False) as pipe:
            for key in found[start : start + 1000]:
                pipe.hdel(key, generation.vector)
            await pipe.execute()
    log.info("memory index %s removed", generation.index)


async def clean_retired(redis: aioredis.Redis, keys: Keys, active: Generation) -> None:
    """Finish removing the index a switch retired (a move cut off after its switch)."""
    retired = await read(redis, keys.retired)
    if retired.get("index") and retired["index"] != active.index:
        old = Generation(number=-1, index=retired["index"], vector=retired["vector"])
        if old.vector != active.vector:
            await remove_generation(redis, keys, old)
    await redis.delete(keys.retired)


async def move(store: Store, batch: int = 64, progress: Progress | None = None) -> int:
    """Build the index for the store's embedder beside the active one, switch to it and
    remove the old one; resumes a move to the same embedder that was cut off. Returns how
    many memories were embedded."""
    redis, keys = store.redis, store.keys
    meta = await read(redis, keys.meta)
    active = Generation.recorded(keys.prefix, meta)
    await clean_retired(redis, keys, active)
    wanted = store.identity()
    moving = await read(redis, keys.moving)
    if moving and same_space(moving, wanted):
        target = Generation.recorded(keys.prefix, moving)
        log.info("resuming the move of memory to %s", wanted["model"])
    else:
        if moving:  # a move to another embedder was left behind: start over
            await remove_generation(redis, keys, Generation.recorded(keys.prefix, moving))
        number = max(active.number, int(moving.get("generation") or 0)) + 1
        target = Generation.of(keys.prefix, number)
        await redis.delete(keys.dirty)  # the new index gets every memory anyway
        record: dict[Any, Any] = {**wanted, **target.fields(), "started_at": str(time.time())}
        await redis.hset(keys.moving, mapping=record)
    index = store.index_for(target)
    if not await index.exists():
        await index.create(overwrite=False)
    embedded = await copy_all(store, target, batch, progress)
    for _ in range(SWITCH_ROUNDS):
        embedded += await drain(store, target, batch)
        switch = redis.register_script(SWITCH)
        new_meta = [item for pair in {**wanted, **target.fields()}.items() for item in pair]
        done = await switch(
            keys=[keys.meta, keys.moving, keys.dirty, keys.retired],
            args=[active.index, active.vector, *new_meta],
        )
        if done:
            break
    else:
        raise MoveStalled(f"memories kept changing during {SWITCH_ROUNDS} rounds; run it again")
    log.info("memory switched to %s (%s)", target.index, wanted["model"])
    store.use(target)
    if active.vector != target.vector:
        await clean_retired(redis, keys, target)
    embedded += await drain(store, target, batch)  # noted by writers on the old index since
    await store.counts.recount()
    return embedded


async def copy_all(store: Store, target: Generation, batch: int, progress: Progress | None) -> int:
    """Give every memory that lacks it the target's vector."""
    redis = store.redis
    found = await memory_keys(redis, store.keys)
    embedded = 0
    if progress is not None:
        progress(0, len(found))
    for start in range(0, len(found), batch):
        chunk = found[start : start + batch]
        async with redis.pipeline(transaction=False) as pipe:
            for key in chunk:
                pipe.hget(key, "text")
                pipe.hexists(key, target.vector)
            answers = await pipe.execute()
        todo = [
            (key, as_text(text))
            for key, text, has in zip(chunk, answers[0::2], answers[1::2], strict=True)
            if text is not None and not has
        ]
        embedded += await embed_into(store, target, todo)
        if progress is not None:
            progress(start + len(chunk), len(found))
    return embedded
