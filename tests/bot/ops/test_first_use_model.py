"""A Parley installed with `pip install .` has no embedding model until something builds it:
the first process that needs it does, once, even when two start together, and says so in one
line instead of the quantizer's hundred."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import numpy as np
import pytest

from bot.config import Settings
from bot.wiring.memory_setup import build_embedder
from memory import embedders, model_build
from memory.model_build import build

pytestmark = pytest.mark.heavy


async def test_two_processes_needing_the_model_first_build_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "share" / "parley" / "model.onnx"
    monkeypatch.setattr(model_build, "RUN_MODEL", target)
    monkeypatch.setattr(embedders, "RUN_MODEL", target)
    caplog.set_level(logging.INFO)
    # a worker's first recall and `parley setup` at the same moment: the lock makes the
    # second wait for the first's file instead of clearing its scratch folder
    embedder, built = await asyncio.gather(
        build_embedder(Settings.load(env_file=None)), asyncio.to_thread(build)
    )
    try:
        assert built == target and model_build.missing(target) is None
        vector = await embedder.vectorizer.aembed("Ana prefers meetings after 10am")
        assert len(vector) == 384 and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3
    finally:
        if embedder.closer is not None:
            await embedder.closer()
    assert "the embedding model is not built yet" in caplog.text
    assert "Quantization parameters" not in caplog.text and "pre-processing" not in caplog.text
    assert sorted(p.name for p in target.parent.iterdir()) == [".model.onnx.lock", "model.onnx"]
