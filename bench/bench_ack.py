"""Slack ack latency: signed Events API requests at a steady 200/s into one `parley run`.

A real `parley run` process (HTTP events, workers and all) on a throwaway Redis Stack, with
Slack's Web API and Anthropic played by local fakes that answer at once. Requests are sent
open loop (each at its scheduled time, whether or not earlier ones were answered), so a
stall shows up as latency rather than as a lower rate. Every acknowledged event must already
be in the inbox when its 200 arrives: the bench checks its dedup mark, which the inbox
writes in the same script as the stream entry, right after each answer. For scale, the
same client GETs /healthz from the same process meanwhile (FLOOR_RATE/s; no Redis, no
Bolt): the floor that the busy process and machine put under any answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis

from bench.bench_service import free_port, start, wait_http
from bench.support import bench_line, percentile, throwaway_redis
from bot.runtime.keys import Keys
from tests.fakes import anthropic as fa
from tests.fakes import slack as fs
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack

SECRET = "bench-signing-secret"
RATE = 200  # requests per second
SECONDS = 10.0
WARMUP = 200
TARGET_P99_MS = 50.0
FLOOR_RATE = 50


def request(n: int) -> tuple[str, bytes]:
    """A direct message from one of 500 people; the event id is unique per request."""
    user = n % 500
    event = fs.dm_event(f"U{user:04d}", f"message {n}", channel=f"D{user:04d}")
    event_id = f"EvBENCH{n:07d}"
    return event_id, json.dumps(fs.event_callback(event, event_id=event_id)).encode()


async def load(
    http: aiohttp.ClientSession, redis: aioredis.Redis, url: str, first: int, count: int
) -> tuple[list[float], Counter[int], int]:
    """Send `count` requests at RATE; latencies (s), answers by status, events not stored."""
    keys = Keys()
    bodies = [request(first + n) for n in range(count)]
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    not_stored = 0

    async def one(event_id: str, body: bytes) -> None:
        nonlocal not_stored
        headers = fs.signed(SECRET, body)
        started = time.perf_counter()
        async with http.post(url, data=body, headers=headers) as response:
            await response.read()
            latencies.append(time.perf_counter() - started)
            statuses[response.status] += 1
            if response.status != 200:
                return
        if not await redis.exists(keys.dedup(f"slack:{event_id}")):
            not_stored += 1

    tasks: set[asyncio.Task[None]] = set()
    begin = time.perf_counter()
    for n, (event_id, body) in enumerate(bodies):
        delay = begin + n / RATE - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.add(asyncio.create_task(one(event_id, body)))
    async with asyncio.timeout(60):
        await asyncio.gather(*tasks)
    return latencies, statuses, not_stored


async def floor(http: aiohttp.ClientSession, url: str, count: int) -> list[float]:
    """Latencies of GET /healthz sent at FLOOR_RATE: an answer with no work behind it."""
    latencies: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        async with http.get(url) as response:
            await response.read()
        latencies.append(time.perf_counter() - started)

    tasks: set[asyncio.Task[None]] = set()
    begin = time.perf_counter()
    for n in range(count):
        delay = begin + n / FLOOR_RATE - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.add(asyncio.create_task(one()))
    async with asyncio.timeout(60):
        await asyncio.gather(*tasks)
    return latencies


def logged_warnings(folder: Path) -> set[str]:
    """The distinct warnings and errors the service logged (they carry no message text)."""
    return {
        line.split(": ", 1)[-1]
        for log in folder.glob("*.log")
        for line in log.read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line
    }


async def main() -> None:
    with throwaway_redis() as redis_url, tempfile.TemporaryDirectory() as logs:
        async with FakeSlack() as slack, FakeAnthropic() as hosted:
            hosted.responder = lambda body: fa.text("ok")
            port, metrics_port = free_port(), free_port()
            base_env = {
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("PARLEY_", "ANTHROPIC_", "OLLAMA_", "TELEGRAM_", "SLACK_"))
            }
            env = {
                **base_env,
                "REDIS_URL": redis_url,
                "SLACK_BOT_TOKEN": "xoxb-bench",
                "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": slack.api_url,
                "ANTHROPIC_API_KEY": "sk-bench",
                "ANTHROPIC_BASE_URL": hosted.url,
                "PARLEY_RATE_LIMIT_PER_MINUTE": "100000",
                "PARLEY_HTTP_PORT": str(port),
                "PARLEY_METRICS_PORT": str(metrics_port),
                "PARLEY_LOG_LEVEL": "WARNING",
            }
            url = f"http://127.0.0.1:{port}/slack/events"
            healthz = f"http://127.0.0.1:{metrics_port}/healthz"
            process = await start("run", env, logs)
            pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=32)
            redis = aioredis.Redis(connection_pool=pool)
            try:
                await wait_http(metrics_port)
                connector = aiohttp.TCPConnector(limit=400)
                async with aiohttp.ClientSession(connector=connector) as http:
                    await load(http, redis, url, 0, WARMUP)
                    (latencies, statuses, not_stored), health = await asyncio.gather(
                        load(http, redis, url, WARMUP, int(RATE * SECONDS)),
                        floor(http, healthz, int(FLOOR_RATE * SECONDS)),
                    )
            finally:
                await redis.aclose()
                process.terminate()
                await process.wait()
            warnings = logged_warnings(Path(logs))
    p50 = percentile(latencies, 0.50) * 1000
    p99 = percentile(latencies, 0.99) * 1000
    print(
        f"{len(latencies)} events at {RATE}/s for {SECONDS:.0f} s: p50 {p50:.1f} ms, "
        f"p99 {p99:.1f} ms, max {max(latencies) * 1000:.1f} ms; "
        f"answers {dict(statuses)}, {not_stored} acknowledged before they were stored"
    )
    print(
        f"floor (GET /healthz meanwhile, {FLOOR_RATE}/s): p50 "
        f"{percentile(health, 0.50) * 1000:.1f} ms, p99 {percentile(health, 0.99) * 1000:.1f} ms"
    )
    for line in sorted(warnings)[:5]:
        print(f"  parley logged: {line}")
    failed = sum(n for status, n in statuses.items() if status != 200)
    ok = p99 <= TARGET_P99_MS and failed == 0 and not_stored == 0
    bench_line(
        "ack",
        ok=ok,
        p50_ms=f"{p50:.1f}",
        p99_ms=f"{p99:.1f}",
        floor_p99_ms=f"{percentile(health, 0.99) * 1000:.1f}",
        rate=RATE,
    )
