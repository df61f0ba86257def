"""`parley doctor`'s embeddings line: what is missing, and the one command that builds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings
from bot.ops.embedding_check import check_embeddings, local_model_check
from bot.ops.invocation import parley_command
from memory import model_build
from memory.embedders import RUN_MODEL


def test_a_model_not_built_yet_is_a_warning_naming_parley_setup(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    check = local_model_check(target)
    assert check.status == "warn"  # the first start builds it: not a failure
    assert check.detail == f"the embedding model is not built yet (it goes to {target})"
    assert check.hint.startswith(f"run `{parley_command()} setup` to build it now")
    assert f"{parley_command()} setup" in check.line()


def test_a_damaged_model_fails(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"not a model")
    check = local_model_check(target)
    assert check.status == "fail" and "SHA-256" in check.detail and "parley setup" in check.hint


def test_versions_that_cannot_build_it_fail_with_the_pins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_build, "version", {"onnx": "1.23.2", "onnxruntime": "1.9"}.get)
    check = local_model_check(tmp_path / "model.onnx")
    assert check.status == "fail"
    assert check.hint.endswith("(pip install onnx==1.23.2 onnxruntime==1.32.0)")


async def test_the_built_model_is_ok_and_ollama_needs_none() -> None:
    assert local_model_check(RUN_MODEL).status == "ok"  # make setup built this environment's
    check = await check_embeddings(
        Settings.load(env_file=None, memory={"PARLEY_EMBEDDER": "ollama"})
    )
    assert check.status == "not configured" and "Ollama" in check.detail
