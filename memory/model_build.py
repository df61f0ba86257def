"""Builds the embedding model Parley runs from the packaged one: `python -m memory.model_build`.

The packaged all-MiniLM-L6-v2 stores int8 weights that onnxruntime turns back into float32 when
it loads them, so every sentence costs float32 matrix products (4.5 ms here) and the process
holds 90 MB of weights. Quantizing it dynamically (int8 weights per output channel, the
activations quantized as each call runs) keeps the weights int8 in memory and computes in
int8; fusing each layer's attention into one node first takes another 12% off a short
sentence (about 1.1 ms here) and half off a 256-token text. The vectors keep a cosine of
0.99 on average (at least 0.97) with the packaged model's (`tests/memory/test_model_build.py`).
`parley setup`, make setup and the container build run this once, and a process that finds no
model builds it on first use; the result is pinned by its SHA-256 like the packaged file, so
the versions of onnx and onnxruntime that build it are pinned in pyproject.toml (`BUILT_WITH`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from memory.embedders import (
    MODEL_SHA256,
    RUN_MODEL,
    RUN_MODEL_SHA256,
    EmbeddingModelError,
    packaged_model,
    verify,
)

# The versions whose build is RUN_MODEL_SHA256; pyproject.toml pins the same ones.
BUILT_WITH = {"onnx": "1.23.2", "onnxruntime": "1.32.0"}
SETUP_HINT = "run `parley setup` (a process that finds no model builds it on first use)"


def other_versions() -> str | None:
    """What is installed instead of the versions that build the pinned model, if anything."""
    found = {}
    for name in BUILT_WITH:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "none"
    if found == BUILT_WITH:
        return None
    have = ", ".join(f"{name} {found[name]}" for name in BUILT_WITH)
    want = " ".join(f"{name}=={pinned}" for name, pinned in BUILT_WITH.items())
    return f"{have} installed, the model is built with {want} (pip install {want})"


def missing(target: Path | None = None) -> str | None:
    """Why the run-time model cannot load as it is (not built, or not the pinned file)."""
    target = target or RUN_MODEL
    if not target.exists():
        return f"the embedding model is not built yet (it goes to {target})"
    try:
        verify(target, RUN_MODEL_SHA256, "embedding model", SETUP_HINT)
    except EmbeddingModelError as exc:
        return str(exc)
    return None


def build(target: Path | None = None, source: Path | None = None) -> Path:
    """Write the run-time model to `target` unless the right file is there already; processes
    that start together build it once (a lock beside it), and a failure says what to do."""
    target = target or RUN_MODEL
    try:
        verify(target, RUN_MODEL_SHA256, "embedding model")
        return target
    except EmbeddingModelError:
        pass
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target.parent / f".{target.name}.lock"):
            return _build(target, source)
    except OSError as exc:
        raise EmbeddingModelError(
            f"cannot write the embedding model at {target}: {exc}; run `parley setup` as a "
            "user who may write there"
        ) from exc


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as file:
        fcntl.flock(file, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def _build(target: Path, source: Path | None) -> Path:
    try:
        verify(target, RUN_MODEL_SHA256, "embedding model")
        return target  # another process built it while this one waited
    except EmbeddingModelError:
        pass
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = source or packaged_model()
    verify(source, MODEL_SHA256, "packaged embedding model")
    # A fixed scratch folder, so what a killed build left (a 90 MB folded model) is cleared.
    scratch = target.parent / f".{target.name}.building"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        folded = scratch / "folded.onnx"
        fold(source, folded)
        fused = scratch / "fused.onnx"
        fuse_attention(folded, fused)
        built = scratch / "model.onnx"
        with _quiet_quantizer():
            quantize_dynamic(fused, built, weight_type=QuantType.QInt8, per_channel=True)
        verify(built, RUN_MODEL_SHA256, "built embedding model", other_versions() or SETUP_HINT)
        os.replace(built, target)  # a reader sees the old file or the whole new one
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """The quantizer logs a line per tensor and advice for image models on the root logger;
    only its errors are worth a line (other modules log through their own loggers)."""

    def errors_only(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR

    root = logging.getLogger()
    root.addFilter(errors_only)
    try:
        yield
    finally:
        root.removeFilter(errors_only)


def fold(source: Path, target: Path) -> None:
    """Constant folding turns the packaged int8 weights into the float32 graph the quantizer
    reads; nothing else is rewritten at this level."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


LAYERS = 6
HEADS = 12
HIDDEN = 384


def fuse_attention(source: Path, target: Path) -> None:
    """Replace each layer's exported attention (three projections, reshapes, transposes,
    scaled scores, mask, softmax: about 40 nodes) by one `Attention` node with the three
    projections packed, which the quantizer turns into one `QAttention`: 12% less time a
    sentence, and float32 outputs equal to the exported graph's.

    The fused node is given no mask: Parley runs every text alone and unpadded, so every
    token attends to every other, which is what the exported mask computes for such a run.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    made = {output: node for node in graph.node for output in node.output}
    used: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            used.setdefault(name, []).append(node)
    weights = {init.name: init for init in graph.initializer}

    def producer(name: str, op: str) -> onnx.NodeProto:
        node = made.get(name)
        if node is None or node.op_type != op:
            raise EmbeddingModelError(f"cannot fuse the model's attention: {name} is no {op}")
        return node

    def projection(name: str) -> tuple[str, np.ndarray, np.ndarray]:
        """Follow a head tensor up to its `x @ W + b`: (x, W, b)."""
        node = made[name]
        while node.op_type != "Add":  # reshapes and transposes of the projection
            node = made[next(i for i in node.input if i in made and i not in weights)]
        product, bias = node.input
        if product in weights:
            product, bias = bias, product
        matmul = producer(product, "MatMul")
        return (
            matmul.input[0],
            numpy_helper.to_array(weights[matmul.input[1]]),
            numpy_helper.to_array(weights[bias]),
        )

    softmaxes = [node for node in graph.node if node.op_type == "Softmax"]
    if len(softmaxes) != LAYERS:
        raise EmbeddingModelError(f"cannot fuse the model's attention: {len(softmaxes)} layers")
    for layer, softmax in enumerate(softmaxes):
        scores = producer(producer(softmax.input[0], "Add").input[0], "MatMul")
        scaled = [producer(name, "Mul") for name in scores.input]
        for mul in scaled:  # q and k each scaled by head_size ** -0.25: Attention's default
            scale = numpy_helper.to_array(weights[mul.input[1]])
            if not np.allclose(scale, (HIDDEN // HEADS) ** -0.25):
                raise EmbeddingModelError("cannot fuse the model's attention: another scale")
        query, key = (mul.input[0] for mul in scaled)
        guard = next(n for n in used[softmax.output[0]] if n.op_type == "Where")  # NaN → 0
        context = used[guard.output[0]][0]
        merged = used[used[context.output[0]][0].output[0]][0]  # transpose, then reshape
        if (context.op_type, merged.op_type) != ("MatMul", "Reshape"):
            raise EmbeddingModelError("cannot fuse the model's attention: unexpected output")
        parts = [projection(name) for name in (query, key, context.input[1])]
        inputs = {x for x, _, _ in parts}
        if len(inputs) != 1:
            raise EmbeddingModelError("cannot fuse the model's attention: inputs differ")
        [x] = inputs
        packed = np.concatenate([w for _, w, _ in parts], axis=1)
        bias = np.concatenate([b for _, _, b in parts])
        names = (f"attention.{layer}.qkv.weight", f"attention.{layer}.qkv.bias")
        graph.initializer.extend(
            numpy_helper.from_array(a.astype(np.float32), n)
            for a, n in zip((packed, bias), names, strict=True)
        )
        fused = helper.make_node(
            "Attention", [x, *names], [merged.output[0]], f"Attention_{layer}",
            domain="com.microsoft", num_heads=HEADS,
        )  # fmt: skip
        index = list(graph.node).index(merged)
        graph.node.remove(merged)
        graph.node.insert(index, fused)
    _drop_unused(graph)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(target))


def _drop_unused(graph: Any) -> None:
    """Remove the nodes and weights nothing reads any more (the graph's inputs stay)."""
    wanted = {output.name for output in graph.output}
    while True:
        read = wanted | {name for node in graph.node for name in node.input}
        dead = [node for node in graph.node if not any(o in read for o in node.output)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    kept = [init for init in graph.initializer if init.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def main() -> int:
    logging.basicConfig(level=logging.ERROR)  # the quantizer's advice on other models
    try:
        path = build()
    except EmbeddingModelError as exc:
        print(f"model_build: {exc}", file=sys.stderr)
        return 1
    print(f"model_build: the embedding model is {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
