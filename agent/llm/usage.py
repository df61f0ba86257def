"""Per-call usage, latency and estimated cost, recorded by provider."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Mapping

from agent.llm import metrics
from agent.llm.base import ChatModel, LLMError, StreamCut
from agent.llm.catalog import lookup
from agent.llm.streaming import StreamEvent, StreamingModel, stream_of
from agent.messages import ChatRequest, ChatResponse, Usage

log = logging.getLogger(__name__)

PriceTable = Mapping[str, tuple[float, float]]  # model → ($ per Mtok input, $ per Mtok output)


def prices_of(prices: PriceTable, model: str, usage: Usage) -> tuple[float, float]:
    """$ per Mtok (input, output) for one call: the operator's table first, then the
    built-in one for Claude models (with its price bands for long prompts)."""
    if model in prices:
        return prices[model]
    known = lookup(model)
    if known is None:
        return 0.0, 0.0
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    for band in sorted(known.bands, key=lambda b: b.above, reverse=True):
        if prompt > band.above:
            return band.input, band.output
    return known.input_price, known.output_price


def estimate_cost(prices: PriceTable, model: str, usage: Usage) -> float:
    """Dollars for one call; cache reads bill at a tenth, cache writes at 1.25× input."""
    input_price, output_price = prices_of(prices, model, usage)
    billed_input = (
        usage.input_tokens + 0.1 * usage.cache_read_tokens + 1.25 * usage.cache_write_tokens
    )
    return (billed_input * input_price + usage.output_tokens * output_price) / 1_000_000


async def close_model(model: object) -> None:
    """Close a model's HTTP client if it has one."""
    close = getattr(model, "close", None)
    if close is not None:
        await close()


class MeteredModel(StreamingModel):
    """Wraps a provider and records each call's outcome, latency, tokens and cost."""

    def __init__(self, model: ChatModel, prices: PriceTable) -> None:
        self.inner = model
        self.name = model.name
        self.prices = prices

    async def close(self) -> None:
        await close_model(self.inner)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        started = time.monotonic()
        try:
            response = await self.inner.complete(request)
        except LLMError as exc:
            metrics.MODEL_CALLS.labels(self.name, type(exc).__name__).inc()
            raise
        finally:
            metrics.MODEL_LATENCY.labels(self.name).observe(time.monotonic() - started)
        return self._meter(response, started)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """The inner model's stream, metered like `complete` once its response arrives."""
        started = time.monotonic()
        try:
            async with contextlib.aclosing(stream_of(self.inner, request)) as events:
                async for event in events:
                    yield self._meter(event, started) if isinstance(event, ChatResponse) else event
        except StreamCut as exc:
            # what a cut stream carried was spent all the same
            exc.partial = self._meter(exc.partial, started, result="StreamCut")
            raise
        except LLMError as exc:
            metrics.MODEL_CALLS.labels(self.name, type(exc).__name__).inc()
            raise
        finally:
            metrics.MODEL_LATENCY.labels(self.name).observe(time.monotonic() - started)

    def _meter(self, response: ChatResponse, started: float, result: str = "ok") -> ChatResponse:
        """Count a call's tokens and cost; the response comes back with its cost filled in."""
        metrics.MODEL_CALLS.labels(self.name, result).inc()
        usage = response.usage
        for kind, count in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ):
            if count:
                metrics.MODEL_TOKENS.labels(self.name, kind).inc(count)
        cost = estimate_cost(self.prices, response.model, usage)
        if cost:
            metrics.MODEL_COST.labels(self.name, response.model).inc(cost)
            usage = usage.model_copy(update={"cost": cost})
            response = response.model_copy(update={"usage": usage})
        log.debug(
            "%s %s: %d in, %d out, %.2f s, $%.5f",
            self.name,
            response.model,
            usage.input_tokens,
            usage.output_tokens,
            time.monotonic() - started,
            cost,
        )
        return response
