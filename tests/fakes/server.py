"""A small toolkit for local HTTP servers that play an external API and record requests.

A fake registers handlers per (method, path); every request is recorded with its parsed
body, so tests can assert what the real SDK sent. Unknown paths answer 404 and are recorded
too, which makes a missing fake handler visible in the test output.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

Handler = Callable[["Recorded", web.Request], Awaitable[web.StreamResponse]]


@dataclass(kw_only=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    query: dict[str, str]
    body: Any
    raw: bytes = b""
    received_at: float = 0.0


@dataclass
class FakeServer:
    """An aiohttp server on 127.0.0.1 with a free port; `async with` starts and stops it."""

    name: str = "fake"
    requests: list[Recorded] = field(default_factory=list)
    _routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._routes[(method.upper(), path)] = handler
            return handler

        return register

    def add(self, method: str, path: str, handler: Handler) -> None:
        self._routes[(method.upper(), path)] = handler

    def calls(self, path: str, method: str | None = None) -> list[Recorded]:
        return [
            r for r in self.requests if r.path == path and (method is None or r.method == method)
        ]

    def count(self, path: str) -> int:
        return len(self.calls(path))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        recorded = Recorded(
            method=request.method,
            path=request.path,
            headers=dict(request.headers),
            query=dict(request.query),
            body=parse_body(request.content_type, raw),
            raw=raw,
            received_at=time.monotonic(),
        )
        self.requests.append(recorded)
        handler = self._routes.get((request.method, request.path))
        if handler is None:
            handler = self._match_prefix(request.method, request.path)
        if handler is None:
            return web.json_response({"error": f"{self.name}: no route"}, status=404)
        return await handler(recorded, request)

    def _match_prefix(self, method: str, path: str) -> Handler | None:
        for (m, p), handler in self._routes.items():
            if m == method and p.endswith("*") and path.startswith(p[:-1]):
                return handler
        return None

    async def start(self, port: int = 0) -> FakeServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # aiohttp waits up to 60 s by default for open handlers (a long poll, a held stream)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def parse_body(content_type: str, raw: bytes) -> Any:
    if not raw:
        return None
    if content_type == "application/json":
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")
    if content_type == "application/x-www-form-urlencoded":
        return dict(parse_qsl(raw.decode(), keep_blank_values=True))
    if content_type.startswith("multipart/"):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(data, status=status, headers=headers)
