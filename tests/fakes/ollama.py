"""A local server that plays Ollama's HTTP API (`/api/chat`, `/api/tags`, `/api/embed`).

    fake = FakeOllama(models=["qwen2.5:7b"])
    fake.script(reply("Hi"), call("calculator", expression="1+1"), failure(500))
    fake.responder = lambda body: reply("default")   # when the script is empty

`/api/show` lists a model's capabilities: "completion" and "tools", plus "vision" for the
models in `fake.vision`. Chat items answer `/api/chat` in order; `embed` answers with
deterministic vectors of `dimensions` floats derived from each input's hash. Requests are
recorded. A chat request with `"stream": true` gets newline-delimited JSON chunks (a few
characters of content each, tool calls in the last content chunk, then a `done` chunk with
the counts), as Ollama sends. A `thought(...)` item thinks first: its
`message.thinking` comes apart from the content (streamed first), unless the request says
`think: false`. `recorded(lines)` replays a recorded stream (`tests/fakes/cuts.py`); an
item's `cut` (`Cut(at, how)`) ends its stream early, `done_reason` replaces "stop".
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from tests.fakes.cuts import Cut, CutHere, Stalls, carry_out, cut_body
from tests.fakes.server import FakeServer, Recorded


@dataclass(frozen=True)
class ChatItem:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    error: str = ""
    cut: Cut | None = None  # the stream ends early, after `cut.at` lines
    done_reason: str = "stop"
    lines: tuple[dict[str, Any], ...] = ()  # for `recorded`: sent as they are
    thinking: str = (
        ""  # a thinking model's `message.thinking`, unless the request says think: false
    )


def reply(content: str) -> ChatItem:
    return ChatItem(content=content)


def thought(thinking: str, then: ChatItem) -> ChatItem:
    """`then`, from a model that thinks first (qwen3, deepseek-r1, gpt-oss)."""
    return ChatItem(
        content=then.content, tool_calls=then.tool_calls, thinking=thinking, done_reason="stop"
    )


def call(name: str, **arguments: Any) -> ChatItem:
    return ChatItem(tool_calls=[{"function": {"name": name, "arguments": arguments}}])


def failure(status: int, message: str = "") -> ChatItem:
    return ChatItem(status=status, error=message or f"fake ollama error {status}")


def recorded(lines: list[dict[str, Any]], *, cut: Cut | None = None) -> ChatItem:
    """A recorded stream, line by line (`cuts.lines(name)`)."""
    return ChatItem(lines=tuple(lines), cut=cut)


Scripted = ChatItem | Callable[[dict[str, Any]], ChatItem]


class FakeOllama(FakeServer):
    def __init__(self, models: list[str] | None = None, dimensions: int = 384) -> None:
        super().__init__(name="ollama")
        self.models = models if models is not None else ["qwen2.5:7b"]
        self.dimensions = dimensions
        self.vision: set[str] = set()
        self.queue: deque[Scripted] = deque()
        self.responder: Callable[[dict[str, Any]], ChatItem] | None = None
        self.add("POST", "/api/chat", self._chat)
        self.add("GET", "/api/tags", self._tags)
        self.add("POST", "/api/embed", self._embed)
        self.add("POST", "/api/show", self._show)
        self.stalls = Stalls()

    async def stop(self) -> None:
        self.stalls.release()
        await super().stop()

    def script(self, *items: Scripted) -> None:
        self.queue.extend(items)

    async def _chat(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        body = recorded.body if isinstance(recorded.body, dict) else {}
        model = body.get("model", "")
        if model not in self.models and f"{model}:latest" not in self.models:
            return web.json_response({"error": f"model '{model}' not found"}, status=404)
        if self.queue:
            item = self.queue.popleft()
        elif self.responder is not None:
            item = self.responder
        else:
            item = failure(500, "the fake has no scripted reply")
        if callable(item):
            item = item(body)
        if item.status != 200:
            return web.json_response({"error": item.error}, status=item.status)
        if body.get("think") is False:
            item = replace(item, thinking="")  # asked not to think: no thinking comes back
        if body.get("stream"):
            return await self._stream(request, model, item)
        message: dict[str, Any] = {"role": "assistant", "content": item.content}
        if item.thinking:
            message["thinking"] = item.thinking
        if item.tool_calls:
            message["tool_calls"] = item.tool_calls
        whole = web.json_response(
            {
                "model": model,
                "created_at": "2026-11-22T00:00:00Z",
                "message": message,
                "done": True,
                "done_reason": item.done_reason,
                "total_duration": 1000,
                "prompt_eval_count": 30,
                "eval_count": 9,
            }
        )
        if item.cut is not None:  # half the body, then the cut
            raw = whole.body if isinstance(whole.body, bytes) else b""
            return await cut_body(request, item.cut, raw, {}, self.stalls)
        return whole

    async def _stream(self, request: web.Request, model: str, item: ChatItem) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)

        def chunk(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
            line = {"model": model, "created_at": "2026-11-22T00:00:00Z", "message": message}
            return {**line, "done": False, **extra}

        lines = list(item.lines)
        if not item.lines:  # a thinking model's thinking streams first, apart from the content
            for i in range(0, len(item.thinking), 8):
                note = {"role": "assistant", "content": "", "thinking": item.thinking[i : i + 8]}
                lines.append(chunk(note))
        pieces = [item.content[i : i + 8] for i in range(0, len(item.content), 8)] or [""]
        for index, piece in enumerate([] if item.lines else pieces):
            message: dict[str, Any] = {"role": "assistant", "content": piece}
            if index == len(pieces) - 1 and item.tool_calls:
                message["tool_calls"] = item.tool_calls
            lines.append(chunk(message))
        if not item.lines:
            done = {"total_duration": 1000, "prompt_eval_count": 30, "eval_count": 9}
            lines.append(
                chunk(
                    {"role": "assistant", "content": ""},
                    done=True,
                    done_reason=item.done_reason,
                    **done,
                )
            )
        try:
            for sent, line in enumerate([*lines, None]):
                if item.cut is not None and sent == item.cut.at:
                    error = json.dumps({"error": f"fake ollama stream error ({item.cut.error})"})
                    following = (json.dumps(line) + "\n").encode() if line is not None else b""
                    await carry_out(
                        item.cut, request, response, error.encode() + b"\n", self.stalls, following
                    )
                if line is not None:
                    await response.write((json.dumps(line) + "\n").encode())
        except CutHere:
            return response
        await response.write_eof()
        return response

    async def _tags(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        return web.json_response(
            {
                "models": [
                    {
                        "name": m,
                        "model": m,
                        "modified_at": "2026-11-01T00:00:00Z",
                        "size": 1,
                        "digest": "0" * 64,
                        "details": {},
                    }
                    for m in self.models
                ]
            }
        )

    async def _show(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        body = recorded.body if isinstance(recorded.body, dict) else {}
        model = str(body.get("model") or "")
        if model not in self.models and f"{model}:latest" not in self.models:
            return web.json_response({"error": f"model '{model}' not found"}, status=404)
        capabilities = ["completion", "tools"] + (["vision"] if model in self.vision else [])
        return web.json_response(
            {
                "modelfile": "",
                "parameters": "",
                "template": "",
                "details": {"format": "gguf", "family": "fake"},
                "model_info": {},
                "capabilities": capabilities,
                "modified_at": "2026-11-01T00:00:00Z",
            }
        )

    async def _embed(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        body = recorded.body if isinstance(recorded.body, dict) else {}
        inputs = body.get("input") or []
        if isinstance(inputs, str):
            inputs = [inputs]
        return web.json_response(
            {"model": body.get("model", ""), "embeddings": [self.vector(t) for t in inputs]}
        )

    def vector(self, text: str) -> list[float]:
        seed = hashlib.sha256(text.encode()).digest()
        raw = [((seed[i % len(seed)] + i) % 97) - 48.0 for i in range(self.dimensions)]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        return [x / norm for x in raw]
