"""`parley doctor`'s line about the local embedding model: built, not built yet (the first
start builds it, `parley setup` does it now), or not buildable with what is installed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.config import Settings
from bot.ops.checks import Check
from bot.ops.invocation import parley_command
from memory.embedders import RUN_MODEL
from memory.model_build import SETUP_HINT, missing, other_versions


async def check_embeddings(settings: Settings) -> Check:
    if settings.memory.embedder == "ollama":
        return Check(
            name="embeddings",
            status="not configured",
            detail=f"memory embeds with Ollama's {settings.ollama.embed_model}: no local model",
        )
    return await asyncio.to_thread(local_model_check, RUN_MODEL)


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
