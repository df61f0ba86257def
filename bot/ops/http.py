"""Two aiohttp listeners: a public one for platform webhooks, an internal one for operations.

The public listener (`PARLEY_HTTP_HOST:PARLEY_HTTP_PORT`) serves only the routes the
platforms and the triggers' senders call (`/slack/events`, `/telegram/webhook`,
`/hooks/<name>`) and opens only when some are registered. The internal one (`PARLEY_METRICS_HOST:PARLEY_METRICS_PORT`) serves `/healthz`,
`/readyz` and `/metrics` in every process, so probes and scrapes never pass the ingress.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[tuple[bool, str]]]
Route = tuple[str, str, Callable[[web.Request], Awaitable[Any]]]  # method, path, handler


class PortInUse(Exception):
    """The configured address is taken; the message names the setting to change."""


IN_FLIGHT_AT_STOP = 2.0  # seconds a request being served gets at stop (probes and scrapes)


class HttpServer:
    def __init__(
        self, host: str, port: int, *, metrics_host: str = "127.0.0.1", metrics_port: int = 0
    ) -> None:
        self.host = host
        self.port = port
        self.metrics_host = metrics_host
        self.metrics_port = metrics_port
        self.app = web.Application(client_max_size=1024 * 1024)
        self.internal = web.Application()
        self.checks: dict[str, ReadinessCheck] = {}
        self.advisory: set[str] = set()  # shown in /readyz, but not what it answers by
        self.liveness_checks: dict[str, ReadinessCheck] = {}
        self.internal.router.add_get("/healthz", self._healthz)
        self.internal.router.add_get("/readyz", self._readyz)
        self.internal.router.add_get("/metrics", make_aiohttp_handler())  # text, OpenMetrics, gzip
        self._runners: list[web.AppRunner] = []

    def add_route(
        self, method: str, path: str, handler: Callable[[web.Request], Awaitable[Any]]
    ) -> None:
        self.app.router.add_route(method, path, handler)

    def add_check(self, name: str, check: ReadinessCheck, *, required: bool = True) -> None:
        """`required=False`: reported with `"required": false` and never makes the process
        not ready (one platform among several, say)."""
        self.checks[name] = check
        if not required:
            self.advisory.add(name)

    def add_liveness_check(self, name: str, check: ReadinessCheck) -> None:
        """A check `/healthz` fails on: something only a restart of the process mends."""
        self.liveness_checks[name] = check

    async def _healthz(self, request: web.Request) -> web.Response:
        alive, results = await _run_checks(self.liveness_checks)
        return web.json_response(
            {"status": "ok" if alive else "failing", "checks": results},
            status=200 if alive else 503,
        )

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, results = await _run_checks(self.checks, self.advisory)
        return web.json_response(
            {"status": "ready" if ready else "not ready", "checks": results},
            status=200 if ready else 503,
        )

    async def start(self) -> None:
        try:
            self.metrics_port = await self._listen(
                self.internal, self.metrics_host, self.metrics_port, "PARLEY_METRICS_PORT"
            )
            log.info("health and metrics on %s:%d", self.metrics_host, self.metrics_port)
            if len(self.app.router.routes()) == 0:
                log.info("no webhook routes: the public HTTP listener stays closed")
                return
            self.port = await self._listen(self.app, self.host, self.port, "PARLEY_HTTP_PORT")
            log.info("webhooks listening on %s:%d", self.host, self.port)
        except BaseException:
            await self.stop()
            raise

    async def _listen(self, app: web.Application, host: str, port: int, setting: str) -> int:
        # aiohttp would give a request in flight 60 s at stop: longer than the whole stop
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=IN_FLIGHT_AT_STOP
        )
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise PortInUse(
                f"{host}:{port} is already in use; stop whatever listens there "
                f"or set {setting} to a free port"
            ) from None
        return _bound_port(site) if port == 0 else port

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in reversed(runners):
            await runner.cleanup()


async def _run_checks(
    checks: dict[str, ReadinessCheck], advisory: set[str] | None = None
) -> tuple[bool, dict[str, Any]]:
    results: dict[str, Any] = {}
    passed = True
    for name, check in checks.items():
        try:
            ok, detail = await check()
        except Exception as exc:  # a failing check means "not ready", never a crash
            ok, detail = False, type(exc).__name__
        results[name] = {"ok": ok, "detail": detail}
        if advisory and name in advisory:
            results[name]["required"] = False
        else:
            passed = passed and ok
    return passed, results


def _bound_port(site: web.TCPSite) -> int:
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else 0
