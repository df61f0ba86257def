"""Embedders served over HTTP: Ollama's `/api/embed`, and any OpenAI-compatible
`/v1/embeddings` (text-embeddings-inference, vLLM, llama.cpp's server, hosted APIs).

Both learn their dimension from a first call, so a server that is down fails at start
rather than at the first recall. Every call is bounded by `call_timeout`: recall must fail
fast when the server is away (the agent then thinks without memory). Neither adds a prefix
or normalises: what the server returns is what its model meant, and the index compares by
cosine, which ignores length.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from memory.embedders import Embedder

OPENAI_BATCH = 32  # inputs a request: servers cap it (text-embeddings-inference: 32 by default)


class EmbeddingServiceError(RuntimeError):
    """An embedding server answered with an error or with something that is not vectors."""


async def ollama_embedder(host: str, model: str, *, call_timeout: float = 10.0) -> Embedder:
    """Embeddings from Ollama's /api/embed through RedisVL's OllamaTextVectorizer; the
    dimension is read from a first call. RedisVL retries a failing call for up to minutes,
    so every embedding is bounded by `call_timeout`: recall must fail fast when Ollama is down.
    """
    from redisvl.utils.vectorize import OllamaTextVectorizer

    # The vectorizer probes the dimension with a blocking call: keep it off the event loop.
    vectorizer = await asyncio.to_thread(
        OllamaTextVectorizer, model=model, host=host, timeout=call_timeout
    )

    async def close() -> None:
        # RedisVL keeps an ollama client of each kind open and offers no close.
        await asyncio.to_thread(vectorizer._client.close)
        await vectorizer._aclient.close()

    return Embedder(
        name="ollama",
        model_id=f"ollama:{model}",
        dims=int(vectorizer.dims or 0),
        vectorizer=vectorizer,
        closer=close,
        timeout=call_timeout,
    )


def vectors(body: Any, count: int) -> list[list[float]]:
    """The vectors of an OpenAI embeddings response, in the order of the inputs."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise EmbeddingServiceError(f"expected {count} embeddings, got {_shape(data)}")
    rows: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
            raise EmbeddingServiceError("an embeddings item has no embedding list")
        index = item.get("index", position)
        if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
            raise EmbeddingServiceError(f"an embeddings item has a bad index: {index!r}")
        try:
            rows[index] = [float(value) for value in item["embedding"]]
        except (TypeError, ValueError) as exc:
            raise EmbeddingServiceError("an embedding holds something other than numbers") from exc
    done = [row for row in rows if row is not None]
    if len({len(row) for row in done}) > 1 or not done or not done[0]:
        raise EmbeddingServiceError("the embeddings differ in length or are empty")
    return done


def _shape(data: Any) -> str:
    return f"{len(data)}" if isinstance(data, list) else type(data).__name__


class _OpenAIClient:
    """POST <url>/v1/embeddings {"model", "input": [...]} with a Bearer key."""

    def __init__(self, url: str, model: str, api_key: str | None, timeout: float) -> None:
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/embeddings") else f"{base}/v1/embeddings"
        if base.endswith("/v1"):
            self.endpoint = f"{base}/embeddings"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.aclient = httpx.AsyncClient(headers=headers, timeout=timeout, trust_env=False)

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts, "encoding_format": "float"}

    @staticmethod
    def _read(response: httpx.Response, count: int) -> list[list[float]]:
        if response.status_code != 200:
            raise EmbeddingServiceError(
                f"the embeddings server answered {response.status_code}: {response.text[:200]}"
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise EmbeddingServiceError("the embeddings server answered with no JSON") from exc
        return vectors(body, count)

    async def aembed_many(self, texts: list[str], **_: Any) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), OPENAI_BATCH):
            chunk = list(texts[start : start + OPENAI_BATCH])
            response = await self.aclient.post(self.endpoint, json=self._payload(chunk))
            out += self._read(response, len(chunk))
        return out

    async def aembed(self, text: str, **_: Any) -> list[float]:
        return (await self.aembed_many([text]))[0]

    async def close(self) -> None:
        await self.aclient.aclose()


async def openai_embedder(
    url: str, model: str, api_key: str | None = None, *, call_timeout: float = 10.0
) -> Embedder:
    """Embeddings from an OpenAI-compatible server (`url` is its root, with or without
    `/v1`); the dimension is read from a first call."""
    client = _OpenAIClient(url, model, api_key, call_timeout)
    try:
        async with asyncio.timeout(call_timeout):
            dims = len(await client.aembed("dimension probe"))
    except BaseException:
        await client.close()
        raise
    return Embedder(
        name="openai",
        model_id=f"openai:{model}",
        dims=dims,
        vectorizer=client,
        closer=client.close,
        timeout=call_timeout,
    )
