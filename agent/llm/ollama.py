"""A local Ollama model behind the ChatModel protocol.

`num_ctx` is always sent: Ollama's small default context silently drops the start of long
prompts (the system prompt with the memories first). Images go on a message's `images` only
when the model says it has the "vision" capability (`/api/show`, asked once); otherwise the
model is told plainly that it cannot see them.

Models that think (qwen3, gpt-oss, deepseek-r1, …) return `message.thinking` apart from the
content: it streams as `ThinkingDelta` (the status line's notes), never as the answer, and is
not kept. `think` (`PARLEY_OLLAMA_THINK`) turns it on, off, or to a level.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import httpx
import ollama

from agent.llm.base import ProviderRejected, ProviderUnavailable, StreamCut
from agent.llm.streaming import (
    StreamEvent,
    StreamingModel,
    TextDelta,
    ThinkingDelta,
    ToolUseStarted,
)
from agent.llm.tls import tls_context
from agent.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

log = logging.getLogger(__name__)

NO_VISION = "[The user attached an image{name}, but this local model cannot see images.]"


class OllamaModel(StreamingModel):
    def __init__(
        self,
        *,
        host: str,
        model: str,
        num_ctx: int,
        timeout: float = 300.0,
        think: bool | str | None = None,
    ) -> None:
        self.name = "ollama"
        self.model = model
        self.num_ctx = num_ctx
        self.think = think  # Ollama's `think`; None: the model's own default
        self.client = ollama.AsyncClient(host=host, timeout=timeout, verify=tls_context())
        self._vision: bool | None = None

    async def sees_images(self) -> bool:
        """Whether the model has the "vision" capability; a known answer is not asked again."""
        if self._vision is None:
            try:
                shown = await self.client.show(self.model)
            except (ollama.ResponseError, ConnectionError, httpx.TransportError) as exc:
                log.warning("could not ask Ollama about %s (%s)", self.model, type(exc).__name__)
                return False
            self._vision = "vision" in (shown.capabilities or [])
        return self._vision

    async def complete(self, request: ChatRequest) -> ChatResponse:
        with self._sdk_errors():
            response = await self.client.chat(**(await self._kwargs(request)))
        return from_wire(response.model_dump(), self.model)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """`/api/chat` with `stream: true`: content deltas, then the assembled response. A
        stream is complete only with its `done: true` line; one that ends earlier, however it
        ends, is a `StreamCut` carrying what had arrived."""
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        last: dict[str, Any] = {}
        try:
            with self._sdk_errors():
                chunks = await self.client.chat(**(await self._kwargs(request)), stream=True)
                async for chunk in chunks:
                    data = chunk.model_dump()
                    message = data.get("message") or {}
                    if message.get("thinking"):  # a thinking model's notes: never the answer
                        yield ThinkingDelta(message["thinking"])
                    if message.get("content"):
                        text.append(message["content"])
                        yield TextDelta(message["content"])
                    for call in message.get("tool_calls") or []:
                        calls.append(call)
                        yield ToolUseStarted((call.get("function") or {}).get("name", ""))
                    last = data
        except ProviderUnavailable as exc:
            if not (text or calls or last):
                raise  # nothing had arrived: not cut, just unavailable
            if not last.get("done"):  # after `done: true` the answer is whole
                partial = _partial(text, last, self.model)
                raise StreamCut(self.name, exc.reason, partial=partial) from exc
        if not last.get("done"):
            partial = _partial(text, last, self.model)
            raise StreamCut(self.name, "the stream ended before done", partial=partial)
        whole = {**last, "message": {"content": "".join(text), "tool_calls": calls}}
        yield from_wire(whole, self.model)

    async def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        has_images = any(m.images for m in request.messages)
        vision = has_images and await self.sees_images()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_wire(request, vision=vision),
            "options": {"num_ctx": self.num_ctx, "num_predict": request.max_tokens},
        }
        if self.think is not None:
            kwargs["think"] = self.think
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        return kwargs

    async def close(self) -> None:
        await self.client.close()

    @contextlib.contextmanager
    def _sdk_errors(self) -> Iterator[None]:
        """The client's errors as the `LLMError`s the fallback acts on, for answers and streams."""
        try:
            yield
        except ollama.ResponseError as exc:
            raise self._classify(exc) from exc
        except (ConnectionError, httpx.TransportError) as exc:
            raise ProviderUnavailable(self.name, f"not reachable ({type(exc).__name__})") from exc

    def _classify(self, exc: ollama.ResponseError) -> Exception:
        message = str(exc.error)
        if "does not support tools" in message:
            return ProviderRejected(
                self.name,
                f"the Ollama model {self.model!r} does not support tools; set OLLAMA_MODEL to "
                "one that does (e.g. qwen2.5 or llama3.1)",
            )
        if exc.status_code == 404:
            return ProviderRejected(
                self.name,
                f"the Ollama model {self.model!r} is not pulled: `ollama pull {self.model}`",
            )
        if exc.status_code == -1:  # an error line after a 200: the server broke mid-answer
            return ProviderUnavailable(self.name, f"stream error: {message[:200]}")
        if exc.status_code >= 500 or exc.status_code in (408, 429):
            return ProviderUnavailable(self.name, f"HTTP {exc.status_code}")
        return ProviderRejected(self.name, f"HTTP {exc.status_code}: {message[:300]}")


def to_wire(request: ChatRequest, *, vision: bool = False) -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    wire: list[dict[str, Any]] = []
    if request.system:
        wire.append({"role": "system", "content": request.system})
    for message in request.messages:
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        if message.role == "assistant":
            calls = []
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    names[block.id] = block.name
                    calls.append({"function": {"name": block.name, "arguments": block.input}})
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                entry["tool_calls"] = calls
            wire.append(entry)
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                content = f"Error: {block.content}" if block.is_error else block.content
                wire.append(
                    {
                        "role": "tool",
                        "content": content,
                        "tool_name": names.get(block.tool_use_id, ""),
                    }
                )
        images = message.images
        if images and not vision:
            notes = [NO_VISION.format(name=f" ({i.name})" if i.name else "") for i in images]
            text = "\n".join([*notes, text]) if text else "\n".join(notes)
        if text or (images and vision):
            entry = {"role": "user", "content": text}
            if images and vision:
                entry["images"] = [image.data for image in images]
            wire.append(entry)
    return wire


def from_wire(data: dict[str, Any], model: str) -> ChatResponse:
    message = data.get("message") or {}
    blocks: list[TextBlock | ToolUseBlock] = []
    if message.get("content"):
        blocks.append(TextBlock(text=message["content"]))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        blocks.append(
            ToolUseBlock(
                id=f"ollama_{uuid.uuid4().hex[:12]}",
                name=function.get("name", ""),
                input=dict(function.get("arguments") or {}),
            )
        )
    has_calls = any(isinstance(b, ToolUseBlock) for b in blocks)
    stop: StopReason = "tool_use" if has_calls else _stop_reason(data.get("done_reason"))
    return ChatResponse(
        message=Message(role="assistant", content=list(blocks)),
        stop_reason=stop,
        usage=_usage(data),
        provider="ollama",
        model=data.get("model") or model,
    )


_DONE_REASONS: dict[str, StopReason] = {"stop": "end_turn", "length": "max_tokens"}
_unknown_seen: set[str] = set()


def _stop_reason(raw: str | None) -> StopReason:
    """Ollama's `done_reason` as ours (none: a plain end); an unknown one is logged once."""
    if not raw:
        return "end_turn"
    known = _DONE_REASONS.get(raw)
    if known is None:
        if raw not in _unknown_seen:
            _unknown_seen.add(raw)
            log.warning("ollama ended a turn with an unknown done_reason %r", raw)
        return "other"
    return known


def _usage(data: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=data.get("prompt_eval_count") or 0, output_tokens=data.get("eval_count") or 0
    )


def _partial(text: list[str], last: dict[str, Any], model: str) -> ChatResponse:
    """What a broken stream had carried: its text (tool calls are dropped), stop reason "cut"."""
    joined = "".join(text)
    return ChatResponse(
        message=Message.assistant(joined) if joined else Message(role="assistant", content=[]),
        stop_reason="cut",
        usage=_usage(last),
        provider="ollama",
        model=last.get("model") or model,
    )
