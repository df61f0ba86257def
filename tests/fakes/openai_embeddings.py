"""A local server that plays an OpenAI-compatible embeddings API (`POST /v1/embeddings`), as
OpenAI, text-embeddings-inference and vLLM serve it.

    fake = FakeEmbeddings(dimensions=768, api_key="sk-test")
    fake.embed = lambda texts: real_model(texts)   # vectors from a real model instead
    fake.shuffled = True                           # items out of order, each with its index
    fake.fail_next(503)                            # the next request answers 503

It answers `{"object": "list", "data": [{"object": "embedding", "index": i, "embedding":
[...]}], "model": …, "usage": {…}}`; by default deterministic vectors derived from each
input's hash. Like TEI it refuses more than `max_batch` inputs a request (413), and a wrong
or missing Bearer key with 401 when `api_key` is set. Requests are recorded.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.server import FakeServer, Recorded


def hashed(text: str, dimensions: int) -> list[float]:
    seed = hashlib.sha256(text.encode()).digest()
    raw = [((seed[i % len(seed)] + i) % 97) - 48.0 for i in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


class FakeEmbeddings(FakeServer):
    def __init__(
        self, dimensions: int = 768, api_key: str | None = None, max_batch: int = 32
    ) -> None:
        super().__init__(name="openai-embeddings")
        self.dimensions = dimensions
        self.api_key = api_key
        self.max_batch = max_batch
        self.shuffled = False
        self.embed: Callable[[list[str]], list[list[float]]] = lambda texts: [
            hashed(text, self.dimensions) for text in texts
        ]
        self.failures: list[int] = []
        self.add("POST", "/v1/embeddings", self._embeddings)

    def fail_next(self, status: int) -> None:
        self.failures.append(status)

    def inputs(self) -> list[str]:
        """Every input embedded so far, in order."""
        found: list[str] = []
        for request in self.calls("/v1/embeddings"):
            body = request.body if isinstance(request.body, dict) else {}
            value = body.get("input")
            found += [value] if isinstance(value, str) else list(value or [])
        return found

    async def _embeddings(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        if self.api_key and recorded.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response(
                {
                    "error": {
                        "message": "Incorrect API key provided",
                        "type": "invalid_request_error",
                    }
                },
                status=401,
            )
        if self.failures:
            status = self.failures.pop(0)
            return web.json_response(
                {"error": {"message": f"fake failure {status}"}}, status=status
            )
        body: dict[str, Any] = recorded.body if isinstance(recorded.body, dict) else {}
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        if not texts or not all(isinstance(text, str) for text in texts):
            return web.json_response({"error": {"message": "input must be text"}}, status=422)
        if len(texts) > self.max_batch:
            return web.json_response(
                {"error": f"batch size {len(texts)} > maximum allowed batch size {self.max_batch}"},
                status=413,
            )
        items = [
            {"object": "embedding", "index": index, "embedding": vector}
            for index, vector in enumerate(self.embed(texts))
        ]
        if self.shuffled:
            items.reverse()
        tokens = sum(len(text.split()) for text in texts)
        return web.json_response(
            {
                "object": "list",
                "data": items,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
