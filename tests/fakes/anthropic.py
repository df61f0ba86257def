"""A local server that plays Anthropic's Messages API, scripted by the test.

    fake = FakeAnthropic()
    await fake.start()
    fake.script(text("Hello"), tool("calculator", expression="2+2"), error(529), hang())
    fake.responder = lambda body: text("default")   # used when the script is empty

`POST /v1/messages` answers with the next scripted item: `text(...)` (end_turn),
`tool(name, **input)` (tool_use), `error(status, retry_after=...)` (the API's real error body
and headers) or `hang()` (never answers, for timeouts). Items may also be functions of the
parsed request body that return an item. Every request is recorded (`fake.requests`,
`fake.calls("/v1/messages")`). `GET /v1/models/{id}` answers for `parley doctor`.

Usage follows the Messages API's prompt caching (`fake.cache`): the prompt is tools, then
system, then messages, in content blocks; a block with `cache_control` is a breakpoint (more
than four is a 400). A request reads the longest cached prefix that ends at a breakpoint or
at one of the 20 block boundaries before it, and writes the prefixes up to its breakpoints
that are at least `min_tokens` long (five-minute lifetime, refreshed by a read).
`cache_read_input_tokens` and `cache_creation_input_tokens` count those; `input_tokens` only
the rest. Tokens are estimated at four characters each. A scripted `usage` overrides it all.

A request with `"stream": true` gets the same item as server-sent events, in the real
sequence (message_start, content_block_start / _delta / _stop with text_delta and
input_json_delta, message_delta with usage and stop_reason, message_stop), the text cut into
`chunk`-character deltas `pace` seconds apart (or each sent once `gate(n)` returns, so a test
can wait for what the client shows before the next delta); `broken(text, kind)` streams `text` and then
dies with an `event: error` of that type. `recorded(events)` replays a recorded stream
(`tests/fakes/cuts.py`); any item's `cut` (`Cut(at, how)`) ends its stream early, and its
`stop_reason` replaces the one the fake would send.

A request naming a current-generation model (`claude-sonnet-5-5`, `claude-haiku-5-5`) meets
that generation's contract (`anthropic_strict`): the 400s it documents, thinking blocks in
every answer (signed, streamed as `thinking_delta` and `signature_delta`), each bound to
its prefix. `fake.refusals` lists what it refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from tests.fakes.anthropic_strict import Refused, StrictAPI, is_strict
from tests.fakes.cuts import Cut, CutHere, Stalls, carry_out, cut_body
from tests.fakes.server import FakeServer, Recorded

_ids = itertools.count(1)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Item:
    kind: str
    content: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    pace: float = 0.0  # seconds between streamed deltas
    chunk: int = 8  # characters per streamed text delta
    error_type: str = ""  # for `broken`: the mid-stream error event
    cut: Cut | None = None  # the stream ends early, after `cut.at` events
    stop_reason: str = ""  # sent instead of the usual one
    events: tuple[tuple[str, dict[str, Any]], ...] = ()  # for `recorded`: sent as they are
    # awaited before the n-th streamed delta (from 0): a condition for it instead of `pace`
    gate: Callable[[int], Awaitable[None]] | None = field(default=None, compare=False)


def text(value: str, *, delay: float = 0.0, usage: dict[str, int] | None = None) -> Item:
    return Item("text", [{"type": "text", "text": value}], delay=delay, usage=usage or {})


def tool(
    name: str, *, thought: str = "", delay: float = 0.0, pace: float = 0.0, **tool_input: Any
) -> Item:
    content: list[dict[str, Any]] = [{"type": "text", "text": thought}] if thought else []
    content.append(
        {"type": "tool_use", "id": f"toolu_{next(_ids):06d}", "name": name, "input": tool_input}
    )
    return Item("tool", content, delay=delay, pace=pace)


def error(status: int, *, retry_after: float | None = None, message: str = "") -> Item:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return Item("error", status=status, headers=headers, content=[{"message": message}])


def hang() -> Item:
    return Item("hang")


def streamed(
    value: str,
    *,
    pace: float = 0.0,
    chunk: int = 8,
    gate: Callable[[int], Awaitable[None]] | None = None,
) -> Item:
    """A text answer whose streamed deltas come `pace` seconds apart, or each once `gate(n)`
    returns."""
    return Item("text", [{"type": "text", "text": value}], pace=pace, chunk=chunk, gate=gate)


def broken(value: str, error_type: str = "overloaded_error", *, pace: float = 0.0) -> Item:
    """Streams `value`, then an `event: error` (a stream that dies midway)."""
    return Item("broken", [{"type": "text", "text": value}], pace=pace, error_type=error_type)


def recorded(events: list[tuple[str, dict[str, Any]]], *, cut: Cut | None = None) -> Item:
    """A recorded stream, event by event (`cuts.stream(name)`)."""
    return Item("recorded", events=tuple(events), cut=cut)


Scripted = Item | Callable[[dict[str, Any]], Item]

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
CACHE_LIFETIME = 300.0


class PromptCache:
    """The API's prompt cache and the usage figures it produces, for one fake server."""

    def __init__(self, *, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self.entries: dict[str, float] = {}  # prefix hash → expiry (monotonic)
        self.swept = 0.0  # expired entries are dropped once a second, not on every request

    @staticmethod
    def blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
        """The prompt's content blocks in cache order: (canonical text, is a breakpoint)."""
        found: list[tuple[str, bool]] = []

        def add(where: str, block: Any) -> None:
            mark = isinstance(block, dict) and "cache_control" in block
            if isinstance(block, dict):
                block = {k: v for k, v in block.items() if k != "cache_control"}
            found.append((where + json.dumps(block, sort_keys=True), mark))

        for tool in body.get("tools") or []:
            add("tool:", tool)
        system = body.get("system")
        for block in [system] if isinstance(system, str) else system or []:
            add("system:", block)
        for message in body.get("messages") or []:
            content = message.get("content")
            for index, block in enumerate([content] if isinstance(content, str) else content):
                add(f"{message.get('role')}{index}:", block)
        return found

    def usage(
        self, body: dict[str, Any], blocks: list[tuple[str, bool]] | None = None
    ) -> dict[str, int]:
        """What the request reads from and writes to the cache (`blocks`: `blocks(body)`,
        when the caller has them already)."""
        blocks = self.blocks(body) if blocks is None else blocks
        now = time.monotonic()
        if now - self.swept >= 1.0:
            self.entries = {k: t for k, t in self.entries.items() if t > now}
            self.swept = now
        digest = hashlib.sha256(str(body.get("model")).encode())
        hashes, totals, total = [], [], 0
        for text, _ in blocks:
            digest.update(text.encode())
            hashes.append(digest.copy().hexdigest())
            total += max(1, len(text) // 4)
            totals.append(total)
        marks = [i for i, (_, mark) in enumerate(blocks) if mark]
        read = 0
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK_BLOCKS), -1):
                if self.entries.get(hashes[i], 0.0) > now:
                    self.entries[hashes[i]] = now + CACHE_LIFETIME
                    read = max(read, totals[i])
                    break
        written = read
        for mark in marks:
            if totals[mark] >= self.min_tokens and totals[mark] > read:
                self.entries[hashes[mark]] = now + CACHE_LIFETIME
                written = max(written, totals[mark])
        return {
            "input_tokens": total - written,
            "cache_creation_input_tokens": written - read,
            "cache_read_input_tokens": read,
        }


class FakeAnthropic(FakeServer):
    def __init__(self) -> None:
        super().__init__(name="anthropic")
        self.queue: deque[Scripted] = deque()
        self.responder: Callable[[dict[str, Any]], Item] | None = None
        self.model = "claude-test"
        self.add("POST", "/v1/messages", self._messages)
        self.add("GET", "/v1/models/*", self._model)
        self._hung: set[asyncio.Future[None]] = set()
        self.stalls = Stalls()
        self.cache = PromptCache()
        # the current generation's contract, for requests that name one of its models
        self.strict = StrictAPI()
        self.refusals: list[str] = []  # what strict mode refused, for a test to show
        # (the request's newest user text, when its first delta went out): for latency figures
        self.first_tokens: list[tuple[str, float]] = []

    def script(self, *items: Scripted) -> None:
        self.queue.extend(items)

    @property
    def message_calls(self) -> list[Recorded]:
        return self.calls("/v1/messages")

    async def _messages(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        body = recorded.body if isinstance(recorded.body, dict) else {}
        blocks = PromptCache.blocks(body)
        breakpoints = sum(mark for _, mark in blocks)
        if breakpoints > MAX_BREAKPOINTS:
            return self._error(
                400,
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {breakpoints}.",
            )
        strict = is_strict(body)
        if strict:
            try:
                self.strict.check(body, recorded.headers)
            except Refused as exc:
                self.refusals.append(str(exc))
                return self._error(400, str(exc))
        if self.queue:
            item = self.queue.popleft()
        elif self.responder is not None:
            item = self.responder
        else:
            item = error(500, message="the fake has no scripted reply")
        if callable(item):
            item = item(body)
        if item.delay:
            await asyncio.sleep(item.delay)
        if item.kind == "hang":
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hung.add(waiter)
            try:
                await waiter
            finally:
                self._hung.discard(waiter)
        if item.kind == "error":
            message = item.content[0]["message"] or f"fake error {item.status}"
            return self._error(item.status, message, item.headers)
        if strict and item.kind == "recorded":
            self.strict.remember_events(item.events, body)
        elif strict:
            item = replace(item, content=self.strict.shape(item.content, body))
        headers = {"request-id": f"req_{next(_ids):08d}"}
        if body.get("stream"):
            return await self._sse(request, item, body, blocks, headers)
        usage = {
            **self.cache.usage(body, blocks),
            "output_tokens": sum(len(json.dumps(c)) for c in item.content) // 4 + 1,
            **item.usage,
        }
        payload = {
            "id": f"msg_{next(_ids):08d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", self.model),
            "content": item.content,
            "stop_reason": item.stop_reason or ("tool_use" if item.kind == "tool" else "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }
        if strict and self.strict.last_dropped:
            payload["input_transformations"] = self.strict.last_dropped
        if item.cut is not None:  # half the body, then the cut
            raw = json.dumps(payload).encode()
            return await cut_body(request, item.cut, raw, headers, self.stalls)
        return web.json_response(payload, headers=headers)

    async def _sse(
        self,
        request: web.Request,
        item: Item,
        body: dict[str, Any],
        blocks: list[tuple[str, bool]],
        headers: dict[str, str],
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        sent = 0

        def sse(event: str, data: dict[str, Any]) -> bytes:
            return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()

        async def send(event: str, data: dict[str, Any]) -> None:
            nonlocal sent
            if item.cut is not None and sent == item.cut.at:
                kind = {"type": item.cut.error, "message": "fake stream error"}
                error = sse("error", {"type": "error", "error": kind})
                following = sse(event, data) if event else b""
                await carry_out(item.cut, request, response, error, self.stalls, following)
            sent += 1
            if event:  # "": only a place for a cut after the last event
                await response.write(sse(event, data))

        try:
            if item.kind == "recorded":
                for event, data in item.events:
                    await send(event, data)
                await send("", {})  # a cut after the last event still happens
                await response.write_eof()
                return response
            return await self._sse_generated(request, response, item, body, blocks, send)
        except CutHere:
            return response

    async def _sse_generated(
        self,
        request: web.Request,
        response: web.StreamResponse,
        item: Item,
        body: dict[str, Any],
        blocks: list[tuple[str, bool]],
        send: Callable[[str, dict[str, Any]], Any],
    ) -> web.StreamResponse:

        usage: dict[str, Any] = {**self.cache.usage(body, blocks), "output_tokens": 1, **item.usage}
        message: dict[str, Any] = {
            "id": f"msg_{next(_ids):08d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", self.model),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        await send("message_start", {"type": "message_start", "message": message})
        first = True
        await send("ping", {"type": "ping"})
        for index, block in enumerate(item.content):
            if block["type"] == "text":
                start: dict[str, Any] = {"type": "text", "text": ""}
                step = max(1, item.chunk)
                pieces = [
                    {"type": "text_delta", "text": block["text"][i : i + step]}
                    for i in range(0, len(block["text"]), step)
                ]
            elif block["type"] == "thinking":  # its text (when shown), then its signature
                start = {"type": "thinking", "thinking": "", "signature": ""}
                step = max(1, item.chunk)
                pieces = [
                    {"type": "thinking_delta", "thinking": block["thinking"][i : i + step]}
                    for i in range(0, len(block["thinking"]), step)
                ]
                pieces.append({"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "redacted_thinking":
                start, pieces = dict(block), []
            else:
                start = {**block, "input": {}}
                raw = json.dumps(block["input"])
                pieces = [
                    {"type": "input_json_delta", "partial_json": raw[i : i + 10]}
                    for i in range(0, len(raw), 10)
                ]
            await send(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
            for number, delta in enumerate(pieces):
                if item.gate is not None:
                    await item.gate(number)
                elif item.pace:
                    await asyncio.sleep(item.pace)
                if first:
                    first = False
                    self.first_tokens.append((last_user_text(body), time.monotonic()))
                await send(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            if item.kind == "broken" and block["type"] != "thinking":  # after the answer's text
                await send(
                    "error",
                    {
                        "type": "error",
                        "error": {"type": item.error_type, "message": "fake stream error"},
                    },
                )
                await response.write_eof()
                return response
            await send("content_block_stop", {"type": "content_block_stop", "index": index})
        await send(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": item.stop_reason
                    or ("tool_use" if item.kind == "tool" else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": item.usage.get("output_tokens", 7)},
            },
        )
        await send("message_stop", {"type": "message_stop"})
        await send("", {})
        await response.write_eof()
        return response

    @staticmethod
    def _error(status: int, message: str, extra: dict[str, str] | None = None) -> web.Response:
        headers = {"request-id": f"req_{next(_ids):08d}", **(extra or {})}
        payload = {
            "type": "error",
            "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
            "request_id": headers["request-id"],
        }
        return web.json_response(payload, status=status, headers=headers)

    async def _model(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        auth = recorded.headers.get("Authorization", "") + recorded.headers.get("X-Api-Key", "")
        if "bad" in auth:
            return web.json_response(
                {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                },
                status=401,
            )
        model_id = request.path.rsplit("/", 1)[-1]
        return web.json_response(
            {
                "type": "model",
                "id": model_id,
                "display_name": model_id,
                "created_at": "2026-01-01T00:00:00Z",
            }
        )

    async def stop(self) -> None:
        self.stalls.release()
        for waiter in list(self._hung):
            if not waiter.done():
                waiter.cancel()
        await super().stop()


def last_user_text(body: dict[str, Any]) -> str:
    """What the user wrote in the newest user turn of a Messages request (without the
    <context> block Parley appends there for the prompt cache's sake)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [
            c.get("text", "")
            for c in content
            if c.get("type") == "text" and not c.get("text", "").startswith("<context>")
        ]
        if texts:
            return " ".join(texts)
    return ""


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the newest user turn, if it carries any."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return []
    content = messages[-1].get("content")
    if isinstance(content, str):
        return []
    return [c for c in content if c.get("type") == "tool_result"]
