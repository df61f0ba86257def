"""The local embedder under concurrency: queries that wait for the model share one call,
each gets its own sentence's vector, and a failing or abandoned call harms no other query."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memory.embedders import BATCH, _Batcher, _MiniLM

SENTENCES = [f"what should I prepare for the review on day {n}?" for n in range(24)] + [
    "Ana's locker is number 12",
    "the deploy window is Thursday afternoon",
]


class Counted:
    """The real model, recording the texts of each call; `gate` holds calls back."""

    def __init__(self, model: _MiniLM) -> None:
        self.model = model
        self.calls: list[list[str]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.fail_next = False

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        self.entered.set()
        self.gate.wait(30)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the model failed")
        return self.model.embed(texts)


@pytest.fixture(scope="module")
def model() -> _MiniLM:
    return _MiniLM()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


async def test_a_lone_query_is_embedded_at_once_on_its_own(
    model: _MiniLM, pool: ThreadPoolExecutor
) -> None:
    counted = Counted(model)
    vector = await _Batcher(counted.embed, pool, threads=2).embed("hello there")
    assert counted.calls == [["hello there"]]
    assert np.allclose(vector, model.embed(["hello there"])[0], atol=1e-5)


async def test_queries_waiting_for_the_model_share_a_call_and_get_their_own_vectors(
    model: _MiniLM, pool: ThreadPoolExecutor
) -> None:
    counted = Counted(model)
    batcher = _Batcher(counted.embed, pool, threads=1)
    counted.gate.clear()  # the first call waits, so the others queue behind it
    tasks = [asyncio.create_task(batcher.embed(SENTENCES[0]))]
    await asyncio.to_thread(counted.entered.wait, 30)
    tasks += [asyncio.create_task(batcher.embed(text)) for text in SENTENCES[1:]]
    await asyncio.sleep(0)
    counted.gate.set()
    vectors = await asyncio.gather(*tasks)
    # the waiting ones in model-sized batches, in the order they came
    assert counted.calls == [SENTENCES[:1], SENTENCES[1 : 1 + BATCH], SENTENCES[1 + BATCH :]]
    alone = model.embed(SENTENCES)
    for text, vector, expected in zip(SENTENCES, vectors, alone, strict=True):
        cosine = float(np.dot(vector, expected))
        assert cosine > 0.9999, text


async def test_a_failed_call_fails_only_its_own_queries(
    model: _MiniLM, pool: ThreadPoolExecutor
) -> None:
    counted = Counted(model)
    batcher = _Batcher(counted.embed, pool, threads=1)
    counted.fail_next = True
    with pytest.raises(RuntimeError, match="the model failed"):
        await batcher.embed("first")
    vector = await batcher.embed("second")
    assert np.allclose(vector, model.embed(["second"])[0], atol=1e-5)


async def test_an_abandoned_query_leaves_the_others_answered(
    model: _MiniLM, pool: ThreadPoolExecutor
) -> None:
    counted = Counted(model)
    batcher = _Batcher(counted.embed, pool, threads=1)
    counted.gate.clear()
    first = asyncio.create_task(batcher.embed("first"))
    await asyncio.to_thread(counted.entered.wait, 30)
    gone = asyncio.create_task(batcher.embed("given up on"))
    kept = asyncio.create_task(batcher.embed("still wanted"))
    await asyncio.sleep(0)
    gone.cancel()  # e.g. its caller's timeout
    counted.gate.set()
    await first
    vector = await kept
    assert gone.cancelled()
    assert counted.calls == [["first"], ["still wanted"]]
    assert np.allclose(vector, model.embed(["still wanted"])[0], atol=1e-5)
    assert batcher.draining == 0


def resident_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]


def test_a_batch_of_long_texts_does_not_keep_its_memory(model: _MiniLM) -> None:
    """The model's allocations go back after each call (an arena would keep ~700 MB here)."""
    before = resident_mb()
    model.embed(["word " * 300] * 32)
    assert resident_mb() - before < 150


def test_hostile_texts_give_unit_vectors(model: _MiniLM) -> None:
    """Empty, huge (cut at the model's 256 tokens), control characters, emoji only."""
    texts = ["", "x" * 200_000, "a\x00b\x1b[2J\ufeff\u202e", "🙂" * 5000, "word " * 50_000]
    vectors = model.embed(texts)
    assert vectors.shape == (len(texts), 384)
    assert np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    # a text past the cut embeds as its first 256 tokens do
    assert np.allclose(vectors[4], model.embed(["word " * 254])[0], atol=1e-5)


@pytest.mark.process
def test_embedding_starts_no_threads_beyond_the_pool() -> None:
    """The tokenizer's own thread pool would take every text from the embedding thread and
    hand it back; in a fresh process, embedding must leave only the threads it had."""
    script = (
        "import os\n"
        "from memory.embedders import _MiniLM\n"
        "model = _MiniLM()\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "for n in range(50): model.embed([f'what is on my list for day {n}?'])\n"
        "print(before, len(os.listdir('/proc/self/task')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    before, after = done.stdout.split()
    assert after == before, done.stdout


@pytest.mark.process
def test_onnxruntime_sends_no_telemetry() -> None:
    """onnxruntime uploads usage telemetry to Microsoft, also as the process exits (strace at
    a stop showed its DNS lookups of mobile.events.data.microsoft.com): the embedder turns
    it off before any session exists, unless the operator set it."""
    script = (
        "import os\n"
        "from memory.embedders import _MiniLM\n"
        "_MiniLM().embed(['hello'])\n"
        "print(os.environ.get('ORT_DISABLE_TELEMETRY'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["1"]
    env["ORT_DISABLE_TELEMETRY"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["0"]
