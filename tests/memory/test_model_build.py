"""The run-time embedding model: built once from the packaged one, pinned, and embedding
as the packaged model does."""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from memory import model_build
from memory.embedders import (
    RUN_MODEL,
    RUN_MODEL_SHA256,
    EmbeddingModelError,
    _MiniLM,
    packaged_model,
)
from memory.model_build import BUILT_WITH, build, fold, fuse_attention, missing, other_versions

EVAL_SET = Path(__file__).parent / "eval" / "recall_set.jsonl"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.heavy
def test_building_gives_the_pinned_file_once(tmp_path: Path) -> None:
    target = tmp_path / "share" / "model.onnx"
    assert build(target) == target
    assert digest(target) == RUN_MODEL_SHA256
    written = target.stat().st_mtime_ns
    build(target)  # already there and right: left alone
    assert target.stat().st_mtime_ns == written
    left = sorted(p.name for p in target.parent.iterdir())
    assert left == [".model.onnx.lock", "model.onnx"]  # no scratch left


@pytest.mark.heavy
def test_what_a_killed_build_left_is_cleared(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    left = tmp_path / ".model.onnx.building"  # a build killed after folding the model
    left.mkdir()
    (left / "folded.onnx").write_bytes(b"x" * 1000)
    build(target)
    assert digest(target) == RUN_MODEL_SHA256
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.onnx.lock", "model.onnx"]


@pytest.mark.heavy
def test_a_damaged_build_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"half a model")
    build(target)
    assert digest(target) == RUN_MODEL_SHA256


def test_pyproject_pins_the_versions_that_build_the_pinned_model() -> None:
    """`pip install .` must bring the onnx and onnxruntime that build RUN_MODEL_SHA256."""
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    dependencies = project["project"]["dependencies"]
    for name, pinned in BUILT_WITH.items():
        assert f"{name}=={pinned}" in dependencies
    assert other_versions() is None  # and they are the ones installed here


def test_other_versions_say_which_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {"onnx": "1.23.2", "onnxruntime": "1.40.0"}
    monkeypatch.setattr(model_build, "version", found.__getitem__)
    assert other_versions() == (
        "onnx 1.23.2, onnxruntime 1.40.0 installed, the model is built with onnx==1.23.2 "
        "onnxruntime==1.32.0 (pip install onnx==1.23.2 onnxruntime==1.32.0)"
    )


def test_missing_says_not_built_or_damaged(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    assert missing(target) == f"the embedding model is not built yet (it goes to {target})"
    target.write_bytes(b"half a model")
    reason = missing(target)
    assert reason is not None and "SHA-256" in reason and "parley setup" in reason
    assert missing(RUN_MODEL) is None  # setup built this environment's


def test_an_unwritable_place_is_one_error_that_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "share").write_text("a file where the folder should be")
    with pytest.raises(
        EmbeddingModelError, match="cannot write the embedding model at .*parley setup"
    ):
        build(tmp_path / "share" / "parley" / "model.onnx")


def test_a_damaged_packaged_model_is_not_built_from(tmp_path: Path) -> None:
    source = tmp_path / "packaged.onnx"
    shutil.copyfile(packaged_model(), source)
    with source.open("r+b") as file:
        file.seek(2_000_000)
        byte = file.read(1)
        file.seek(2_000_000)
        file.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingModelError, match="packaged embedding model"):
        build(tmp_path / "model.onnx", source)
    assert not (tmp_path / "model.onnx").exists()


@pytest.mark.heavy
def test_the_built_model_embeds_as_the_packaged_one() -> None:
    rows = [json.loads(line) for line in EVAL_SET.read_text().splitlines() if line.strip()]
    facts = [row["text"] for row in rows if row["type"] == "fact"]
    questions = [row["question"] for row in rows if row["type"] == "fact"]
    built = _MiniLM(RUN_MODEL)
    packaged = _MiniLM(RUN_MODEL)
    packaged.session = onnxruntime.InferenceSession(
        str(packaged_model()), providers=["CPUExecutionProvider"]
    )
    for texts in (facts, questions):
        cosines = (built.embed(texts) * packaged.embed(texts)).sum(axis=1)
        assert cosines.min() >= 0.97 and cosines.mean() >= 0.99, (cosines.min(), cosines.mean())
    # Among all 205 facts, each question's own fact ranks about as often first and in the
    # top five (measured: 0.51 and 0.79 built, 0.51 and 0.80 packaged).
    for within in (1, 5):
        found = []
        for model in (built, packaged):
            similarity = model.embed(questions) @ model.embed(facts).T
            own = similarity[np.arange(len(questions)), np.arange(len(questions))]
            found.append(np.mean((similarity > own[:, None]).sum(axis=1) < within))
        assert found[0] >= found[1] - 0.03, (within, found)


@pytest.fixture(scope="module")
def fused_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The folded export and its fused graph, made once for the tests that read them."""
    folder = tmp_path_factory.mktemp("fusion")
    folded, fused = folder / "folded.onnx", folder / "fused.onnx"
    fold(packaged_model(), folded)
    fuse_attention(folded, fused)
    return folded, fused


@pytest.mark.heavy
def test_fused_attention_computes_what_the_exported_graph_does(
    fused_pair: tuple[Path, Path],
) -> None:
    """Before quantization the fused graph must be the same function: each text runs alone
    and unpadded, where the exported mask lets every token see every other."""
    folded, fused = fused_pair
    texts = ["hi", "what should I prepare for the apollo review?", "Grüße 東京 🙂 " * 40]
    runs = []
    for path in (folded, fused):
        model = _MiniLM(RUN_MODEL)
        model.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        runs.append(model.embed(texts))
    assert np.abs(runs[0] - runs[1]).max() < 1e-5
    nodes = onnx.load(str(fused)).graph.node
    assert sum(n.op_type == "Attention" for n in nodes) == 6 and len(nodes) < 120


def test_a_graph_of_another_shape_is_not_fused(
    fused_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    with pytest.raises(EmbeddingModelError, match="cannot fuse the model's attention"):
        fuse_attention(fused_pair[1], tmp_path / "again.onnx")  # no softmax left to find
