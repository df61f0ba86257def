"""Builds the embedding model Parley runs from the packaged one: `python -m memory.model_build`.

The packaged all-MiniLM-L6-v2 stores int8 weights that onnxruntime turns back into float32 when
it loads them, so every sentence costs float32 matrix products (4.5 ms here) and the process
holds 90 MB of weights. Quantizing it dynamically (int8 weights per output channel, the
activations quantized as each call runs) keeps the weights int8 in memory and computes in
int8: 1.0-1.8 ms a sentence. The vectors keep a cosine of 0.99 on average (at least 0.97)
with the packaged model's (`tests/memory/test_model_build.py`). Setup and the container build run this once; the result
is pinned by its SHA-256 like the packaged file, so the same versions of onnx and onnxruntime
(constraints.txt) must build it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

from memory.embedders import (
    MODEL_SHA256,
    RUN_MODEL,
    RUN_MODEL_SHA256,
    EmbeddingModelError,
    packaged_model,
    verify,
)


def build(target: Path = RUN_MODEL, source: Path | None = None) -> Path:
    """Write the run-time model to `target` unless the right file is there already."""
    try:
        verify(target, RUN_MODEL_SHA256, "embedding model")
        return target
    except EmbeddingModelError:
        pass
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = source or packaged_model()
    verify(source, MODEL_SHA256, "packaged embedding model")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A fixed scratch folder, so what a killed build left (a 90 MB folded model) is cleared.
    scratch = target.parent / f".{target.name}.building"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        # Constant folding turns the packaged int8 weights into the float32 graph the
        # quantizer reads; nothing else is rewritten at this level.
        folded = scratch / "folded.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        built = scratch / "model.onnx"
        quantize_dynamic(folded, built, weight_type=QuantType.QInt8, per_channel=True)
        verify(built, RUN_MODEL_SHA256, "built embedding model")
        os.replace(built, target)  # a reader sees the old file or the whole new one
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


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
