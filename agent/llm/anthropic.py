"""Anthropic's Messages API behind the ChatModel protocol.

SDK retries are off: the fallback decides what a failure means.

Prompt caching covers the conversation, not only the system prompt: the cached prefix is
tools → the stable head of the system prompt → every earlier turn, with breakpoints on the
last tool, the system head, the last prior turn and the newest turn (the API's maximum of
four). What changes from call to call (time, recalled memories, summary, objective) would
break that prefix, so it travels after the last breakpoint, at the end of the newest user
turn, wrapped in <context>.

The SDK traces every call with OpenTelemetry unless told not to; with no tracer provider set
up, each call still builds a span that goes nowhere. So tracing is off unless the process has
it configured (`tracing_configured`); then the SDK's own environment variables decide.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any, cast

import aiohttp
import anthropic
import httpx2
import orjson
from anthropic import AsyncStream
from anthropic.types import Message as ApiMessage
from opentelemetry import trace

from agent.llm.anthropic_stream import Assembly, stop_reason, thinking_of, usage_of
from agent.llm.anthropic_wire import CACHE, to_wire
from agent.llm.base import ProviderAuthError, ProviderRejected, ProviderUnavailable, StreamCut
from agent.llm.binding import NOT_BOUND, Sent, thinking_request
from agent.llm.catalog import thinks_always
from agent.llm.streaming import StreamEvent, StreamingModel
from agent.llm.tls import tls_context
from agent.messages import (
    ChatRequest,
    ChatResponse,
    ContentBlock,
    Message,
    TextBlock,
    ToolUseBlock,
)

log = logging.getLogger(__name__)

# OpenTelemetry's variables that send traces somewhere (the exporter's has a value "none")
_OTEL_TRACING = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_PYTHON_TRACER_PROVIDER",
)


def tracing_configured(
    environ: Mapping[str, str] = os.environ, provider: trace.TracerProvider | None = None
) -> bool:
    """Whether the operator or the host set up OpenTelemetry tracing for this process: the
    SDK's `ANTHROPIC_OPEN_TELEMETRY*` variables, OpenTelemetry's tracing variables, or a
    tracer provider installed before the client is built."""
    if any(name.startswith("ANTHROPIC_OPEN_TELEMETRY") for name in environ):
        return True
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if (exporter and exporter != "none") or any(environ.get(name) for name in _OTEL_TRACING):
        return True
    provider = provider if provider is not None else trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


class AnthropicModel(StreamingModel):
    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout: float = 30.0,
        effort: str | None = None,
        display: str = "summarized",
    ) -> None:
        self.name = "anthropic"
        self.model = model
        # The current generation's contract (`catalog`, `binding`); 4.x requests stay as they were.
        self.thinks = thinks_always(model)
        self.effort = effort
        self.display = display
        self.traced = tracing_configured()
        # aiohttp under the SDK: about a fifth less CPU per call than its default httpx.
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout, verify=tls_context()),
            # None: the SDK's own variables decide; False: no span work at all (~0.3 ms a call)
            open_telemetry=None if self.traced else False,
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        wire, sent = self._request(request)
        with sdk_errors():
            # The raw response's JSON, not the SDK's parsed Message: building those models
            # only to dump them again cost about a fifth of the CPU of a call.
            raw = await self.client.messages.with_raw_response.create(**wire)
            data = raw.http_response.json()
        return sent.stamp(from_wire(data, self.model))

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """The Messages API's server-sent events as deltas, then the whole response.

        The raw events, assembled here (`anthropic_stream`): the SDK's stream helper rebuilds
        a snapshot of the whole message on every delta, which costs more CPU than the rest of
        a step. A stream that ends without `message_stop`, however it ends, is a `StreamCut`
        carrying what had arrived.
        """
        assembly = Assembly(self.model)
        wire, sent = self._request(request)
        try:
            with sdk_errors():
                async with contextlib.aclosing(self._events(wire)) as events:
                    async for event in events:
                        for out in assembly.feed(event):
                            yield out
        except ProviderUnavailable as exc:
            if not assembly.started or isinstance(exc, StreamCut):
                raise  # nothing had arrived: not cut, just unavailable (retry-after and all)
            if not assembly.stopped:  # after `message_stop` the answer is whole
                raise StreamCut(self.name, exc.reason, partial=assembly.partial()) from exc
        if not assembly.stopped:
            raise StreamCut(self.name, "the stream ended early", partial=assembly.partial())
        yield sent.stamp(assembly.response())

    async def _events(self, wire: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        """The stream's events as the API's JSON."""
        if self.traced:  # the SDK's method, which records the call's span
            typed = await self.client.messages.create(**wire, stream=True)
            async with typed:
                async for event in typed:
                    yield event.model_dump()
            return
        # The SDK's own generic post, with the body already JSON: `messages.create` first
        # copies the whole request (every tool schema and turn) looking for values to convert,
        # which plain JSON never holds. That copy was about 0.3 ms of CPU a call. Its events
        # come as the JSON the API sent (`object`): building the SDK's event models for them
        # cost another 0.08 ms.
        raw = await self.client.post(
            "/v1/messages",
            cast_to=ApiMessage,  # what `messages.create` names
            content=to_json({**wire, "stream": True}),
            stream=True,
            stream_cls=AsyncStream[object],
        )
        async with raw:
            async for event in raw:
                yield cast(dict[str, Any], event)

    def wire_request(self, request: ChatRequest) -> dict[str, Any]:
        return self._request(request)[0]

    def _request(self, request: ChatRequest) -> tuple[dict[str, Any], Sent]:
        """The request's JSON, and what a thinking model's answer must remember of it."""
        if self.thinks:
            return thinking_request(
                request, model=self.model, effort=self.effort, display=self.display
            )
        return self._wire_4x(request), NOT_BOUND

    def _wire_4x(self, request: ChatRequest) -> dict[str, Any]:
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if tools:
            tools[-1] = {**tools[-1], "cache_control": CACHE}
        messages = [to_wire(m) for m in request.messages]
        stable = request.system[: request.system_stable or len(request.system)]
        changing = request.system[len(stable) :].strip()
        for message in messages[-2:]:  # the last prior turn and the newest one
            message["content"][-1] = {**message["content"][-1], "cache_control": CACHE}
        system = [{"type": "text", "text": stable, "cache_control": CACHE}] if stable else []
        if changing and messages and messages[-1]["role"] == "user":
            context = f"<context>\n{changing}\n</context>"
            messages[-1]["content"].append({"type": "text", "text": context})
        elif changing:
            system.append({"type": "text", "text": changing})
        wire: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system:
            wire["system"] = system
        if tools:
            wire["tools"] = tools
        return wire

    async def close(self) -> None:
        await self.client.close()


def to_json(value: Any) -> bytes:
    """A request body. orjson takes a twentieth of json's CPU (58 → 3 µs for 10 KB); json
    writes what orjson refuses, such as an integer past 64 bits in a model's tool call."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def from_wire(data: dict[str, Any], model: str) -> ChatResponse:
    blocks: list[ContentBlock] = []
    for block in data.get("content") or []:
        if block.get("type") == "text":
            blocks.append(TextBlock(text=block.get("text", "")))
        elif (kept := thinking_of(block)) is not None:
            blocks.append(kept)
        elif block.get("type") == "tool_use":
            blocks.append(
                ToolUseBlock(id=block["id"], name=block["name"], input=block.get("input") or {})
            )
    return ChatResponse(
        message=Message(role="assistant", content=list(blocks)),
        stop_reason=stop_reason(data.get("stop_reason")),
        usage=usage_of(data.get("usage") or {}),
        provider="anthropic",
        model=data.get("model") or model,
    )


@contextlib.contextmanager
def sdk_errors() -> Iterator[None]:
    """The SDK's errors as the `LLMError`s the fallback acts on, for answers and streams."""
    try:
        yield
    except anthropic.APIStatusError as exc:
        raise classify(exc) from exc
    except anthropic.APITimeoutError as exc:
        raise ProviderUnavailable("anthropic", "timed out") from exc
    except anthropic.APIConnectionError as exc:
        raise ProviderUnavailable("anthropic", "connection failed") from exc
    except (httpx2.TransportError, aiohttp.ClientError, OSError) as exc:
        # the HTTP client's own read errors, raised past the SDK once a body is streaming
        raise ProviderUnavailable("anthropic", f"connection lost ({type(exc).__name__})") from exc
    except ValueError as exc:  # a body cut short is not JSON
        raise ProviderUnavailable("anthropic", "a broken response body") from exc


def classify(exc: anthropic.APIStatusError) -> Exception:
    """An HTTP error, or an `event: error` that arrived mid-stream after a 200."""
    status = exc.status_code
    if status < 400:
        return _stream_error(exc)
    if status in (401, 403):
        return ProviderAuthError("anthropic", f"HTTP {status}")
    if status == 429 or status == 408 or status >= 500:
        return ProviderUnavailable(
            "anthropic", f"HTTP {status}", retry_after=retry_after(exc.response.headers)
        )
    return ProviderRejected("anthropic", f"HTTP {status}: {_error_message(exc)}")


# Error types an `event: error` carries mid-stream, where the HTTP status was already 200:
# only these blame the request or the key; any other means the provider broke.
_STREAM_REJECTED = {"invalid_request_error", "not_found_error", "request_too_large"}
_STREAM_AUTH = {"authentication_error", "permission_error"}


def _stream_error(exc: anthropic.APIStatusError) -> Exception:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    kind = str(error.get("type") or "") if isinstance(error, dict) else ""
    if kind in _STREAM_REJECTED:
        return ProviderRejected("anthropic", f"stream error: {kind}")
    if kind in _STREAM_AUTH:
        return ProviderAuthError("anthropic", f"stream error: {kind}")
    return ProviderUnavailable("anthropic", f"stream error: {kind or 'unknown'}")


def retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))[:300]
    return ""
