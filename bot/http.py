"""The one aiohttp server: platform webhooks, health, readiness and metrics."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[tuple[bool, str]]]


class HttpServer:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.app = web.Application(client_max_size=1024 * 1024)
        self.checks: dict[str, ReadinessCheck] = {}
        self.liveness_checks: dict[str, ReadinessCheck] = {}
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)
        self._runner: web.AppRunner | None = None

    def add_route(
        self, method: str, path: str, handler: Callable[[web.Request], Awaitable[Any]]
    ) -> None:
        self.app.router.add_route(method, path, handler)

    def add_check(self, name: str, check: ReadinessCheck) -> None:
        self.checks[name] = check

    def add_liveness_check(self, name: str, check: ReadinessCheck) -> None:
        """A check `/healthz` fails on: something only a restart of the process mends."""
        self.liveness_checks[name] = check

    async def _healthz(self, request: web.Request) -> web.Response:
        alive, results = await _run_checks(self.liveness_checks)
        return web.json_response(
            {"status": "ok" if alive else "failing", "checks": results},
            status=200 if alive else 503,
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, results = await _run_checks(self.checks)
        return web.json_response(
            {"status": "ready" if ready else "not ready", "checks": results},
            status=200 if ready else 503,
        )

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = _bound_port(site)
        log.info("HTTP server listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def _run_checks(checks: dict[str, ReadinessCheck]) -> tuple[bool, dict[str, Any]]:
    results = {}
    passed = True
    for name, check in checks.items():
        try:
            ok, detail = await check()
        except Exception as exc:  # a failing check means "not ready", never a crash
            ok, detail = False, type(exc).__name__
        results[name] = {"ok": ok, "detail": detail}
        passed = passed and ok
    return passed, results


def _bound_port(site: web.TCPSite) -> int:
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else 0
