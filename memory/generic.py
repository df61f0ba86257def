"""Questions about everything remembered ("what do you know about me?").

Such a question is about no memory in particular, so by similarity it is far from all of
them (0.8–0.95 cosine distance). Recall recognises it by its closeness to a few such
questions and answers with the newest memories instead.
"""

from __future__ import annotations

import asyncio

import numpy as np

from memory.embedders import Embedder

EXAMPLES = [
    "what do you know about me?",
    "what do you remember about me?",
    "what have I told you about myself?",
    "tell me everything you remember",
    "what do you remember?",
    "what things have you memorised?",
    "show me what you know about us",
    "what do you know about our team?",
    "list what you remember",
    "what have you stored about me?",
]


class GenericQuestions:
    def __init__(self, embedder: Embedder, max_distance: float) -> None:
        self.embedder = embedder
        self.max_distance = max_distance
        self._examples: np.ndarray | None = None
        self._lock = asyncio.Lock()

    async def distance(self, vector: list[float]) -> float:
        """Cosine distance from the vector to the closest example question."""
        if self._examples is None:
            async with self._lock:
                if self._examples is None:
                    examples = np.asarray(await self.embedder.embed_many(EXAMPLES), np.float32)
                    self._examples = examples / np.linalg.norm(examples, axis=1, keepdims=True)
        query = np.asarray(vector, dtype=np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        return float(1.0 - np.max(self._examples @ query))

    async def matches(self, vector: list[float]) -> bool:
        return self.max_distance > 0 and await self.distance(vector) <= self.max_distance
