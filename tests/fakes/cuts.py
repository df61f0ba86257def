"""Ways a fake model stream can end early, shared by the Anthropic (SSE) and Ollama (NDJSON)
fakes, and the recorded streams they replay.

    fake.script(fa.recorded(stream("anthropic_text"), cut=Cut(at=5, how="drop")))

`Cut(at=n, how=…)` lets the first `n` events (SSE events, or NDJSON lines) out, then:
"end" closes the body cleanly (no `message_stop` / `done: true`), "drop" aborts the TCP
connection mid-body, "torn" sends half of the next event (or line) and aborts, "stall" sends
nothing more until the fake stops, "error" sends the API's error event (`event: error` / an
`{"error": …}` line) and ends.

The recorded streams in `tests/corpus/models/` are shaped exactly as the APIs send them
(sources in `tests/corpus/SOURCES.md`): one `.sse` file per Anthropic stream (the raw
`event:` / `data:` text) and one `.ndjson` file per Ollama stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "models"

How = Literal["end", "drop", "torn", "stall", "error"]
HOWS: tuple[How, ...] = ("end", "drop", "torn", "stall", "error")


@dataclass(frozen=True)
class Cut:
    at: int  # events let out before the cut
    how: How
    error: str = "overloaded_error"  # the error event's type, for "error"


class CutHere(Exception):
    """Raised by a fake's send once its cut has been carried out: stop writing."""


class Stalls:
    """Streams held open by a "stall" cut, released when the fake stops."""

    def __init__(self) -> None:
        self.waiters: set[asyncio.Future[None]] = set()

    async def hold(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.add(waiter)
        try:
            await waiter
        finally:
            self.waiters.discard(waiter)

    def release(self) -> None:
        for waiter in list(self.waiters):
            if not waiter.done():
                waiter.cancel()


async def carry_out(
    cut: Cut,
    request: web.Request,
    response: web.StreamResponse,
    error: bytes,
    stalls: Stalls,
    following: bytes = b"",
) -> None:
    """End `response` the way `cut` says; `error` is the API's error event, ready;
    `following` the event (or line) the cut falls before."""
    if cut.how == "torn":
        await response.write(following[: max(1, len(following) // 2)])
    if cut.how in ("drop", "torn"):
        transport = request.transport
        if transport is not None:
            transport.abort()  # no chunked terminator: the client sees a broken body
    elif cut.how == "stall":
        await stalls.hold()
    else:
        if cut.how == "error":
            await response.write(error)
        await response.write_eof()
    raise CutHere


async def cut_body(
    request: web.Request, cut: Cut, raw: bytes, headers: dict[str, str], stalls: Stalls
) -> web.StreamResponse:
    """A whole (non-streamed) JSON answer cut the same ways: half the body, then the cut."""
    response = web.StreamResponse(headers={**headers, "Content-Type": "application/json"})
    response.content_length = len(raw)
    await response.prepare(request)
    await response.write(raw[: len(raw) // 2])
    with contextlib.suppress(CutHere):
        await carry_out(cut, request, response, b"", stalls)
    return response


def stream(name: str) -> list[tuple[str, dict[str, Any]]]:
    """A recorded Anthropic stream: its (event, data) pairs, in order."""
    events: list[tuple[str, dict[str, Any]]] = []
    for block in (CORPUS / f"{name}.sse").read_text().strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def lines(name: str) -> list[dict[str, Any]]:
    """A recorded Ollama stream: its NDJSON lines, in order."""
    text = (CORPUS / f"{name}.ndjson").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
