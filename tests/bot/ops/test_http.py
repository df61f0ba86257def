"""The public listener carries only webhooks; health, readiness and metrics stay internal."""

from __future__ import annotations

import gzip

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

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


async def test_metrics_speak_what_the_scraper_asks_for_with_the_same_names() -> None:
    """prometheus_client's own handler: the text format by default, OpenMetrics when the
    scraper asks for it, gzip when it accepts it, and `name[]` picks families."""
    server = HttpServer("127.0.0.1", 0, metrics_port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as http:
            async with http.get(url, headers={"Accept-Encoding": "identity"}) as plain:
                assert plain.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = (await plain.read()).decode()
            openmetrics = {
                "Accept": "application/openmetrics-text; version=1.0.0",
                "Accept-Encoding": "identity",
            }
            async with http.get(url, headers=openmetrics) as response:
                assert response.headers["Content-Type"].startswith("application/openmetrics-text")
                assert (await response.read()).decode().endswith("# EOF\n")
            async with http.get(url, headers={"Accept-Encoding": "gzip"}) as zipped:
                assert zipped.headers["Content-Encoding"] == "gzip"
                assert gzip.decompress(await zipped.read()).decode().count("# TYPE") > 10
            picked = {"name[]": "parley_run_seconds_count"}
            async with http.get(url, params=picked, headers={"Accept-Encoding": "identity"}) as one:
                assert [
                    line for line in (await one.read()).decode().splitlines() if "TYPE" in line
                ] == ["# TYPE parley_run_seconds histogram"]
    finally:
        await server.stop()
    # The families and their labels are the ones the dashboards and alerts use.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["parley_messages_in"].type == "counter"
    assert families["parley_queue_lag_seconds"].type == "histogram"
    assert families["parley_pending_decisions"].type == "gauge"
    assert "# HELP parley_messages_in_total Platform events accepted into the inbox" in text
    assert "# HELP parley_run_steps Think steps per run" in text
