"""The public listener carries only webhooks; health, readiness and metrics stay internal."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from bot.ops.http import HttpServer

pytestmark = pytest.mark.network


async def hook(request: web.Request) -> web.Response:
    return web.Response(text="hook")


async def test_health_and_metrics_are_served_only_on_the_internal_port() -> None:
    server = HttpServer("127.0.0.1", 0, metrics_port=0)
    server.add_route("POST", "/telegram/webhook", hook)
    await server.start()
    try:
        assert server.port and server.metrics_port and server.port != server.metrics_port
        public = f"http://127.0.0.1:{server.port}"
        internal = f"http://127.0.0.1:{server.metrics_port}"
        async with aiohttp.ClientSession() as http:
            assert (await http.post(f"{public}/telegram/webhook")).status == 200
            for path in ("/healthz", "/readyz", "/metrics"):
                assert (await http.get(f"{public}{path}")).status == 404, path
                assert (await http.get(f"{internal}{path}")).status == 200, path
            assert (await http.post(f"{internal}/telegram/webhook")).status in (404, 405)
            metrics = await (await http.get(f"{internal}/metrics")).text()
            assert "parley_messages_in_total" in metrics
    finally:
        await server.stop()


async def test_readiness_checks_added_after_start_apply() -> None:
    server = HttpServer("127.0.0.1", 0, metrics_port=0)
    await server.start()
    try:

        async def down() -> tuple[bool, str]:
            return False, "unreachable"

        url = f"http://127.0.0.1:{server.metrics_port}/readyz"
        async with aiohttp.ClientSession() as http:
            assert (await http.get(url)).status == 200
            server.add_check("platforms", down)
            answer = await http.get(url)
            assert answer.status == 503
            assert (await answer.json())["checks"]["platforms"]["detail"] == "unreachable"
    finally:
        await server.stop()


async def test_without_webhook_routes_only_the_internal_listener_opens() -> None:
    server = HttpServer("127.0.0.1", 0, metrics_port=0)
    await server.start()
    try:
        assert server.port == 0  # nothing bound
        async with aiohttp.ClientSession() as http:
            health = await http.get(f"http://127.0.0.1:{server.metrics_port}/healthz")
            assert health.status == 200
    finally:
        await server.stop()
