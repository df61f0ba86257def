"""Service overhead: a Telegram update in → the reply posted, with a zero-latency model.

Real `parley` processes (one `run`; then one `gateway` + two `worker`s) on a throwaway Redis
Stack, Telegram in webhook mode and Anthropic played by local fakes that answer at once.
Each concurrent conversation sends its next message as soon as the previous reply arrives
(capacity), and then once more with a pause between messages (latency below saturation:
back to back, 50 conversations at p50 20 ms would need 2,500 objectives/s).
What is measured is everything Parley does per objective: webhook, dedup, queue, lock,
session, limits, memory recall, the model round trip, delivery. The bench users have no
memories, so recall ends at counting them; embedding + KNN is measured by bench_memory.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp

from bench.support import describe, percentile, throwaway_redis
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

SECRET = "bench-secret"
PER_CONVERSATION = 20
# (conversations, mean pause): back to back measures capacity; with people pausing to read,
# 50 conversations offer about 100 objectives/s, which measures latency below saturation.
RUNS = [(1, 0.0), (10, 0.0), (50, 0.0), (50, 0.5)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start(role: str, env: dict[str, str], logs: str) -> asyncio.subprocess.Process:
    log = (Path(logs) / f"{role}-{time.monotonic_ns()}.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "--env-file",
        "/dev/null",
        role,
        env=env,
        stdout=log,
        stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL,
    )
    log.close()
    return process


async def wait_http(port: int) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the gateway did not become ready")


async def measure(
    telegram: FakeTelegram, url: str, concurrency: int, base: int, *, pause: float = 0.0
) -> tuple[list[float], float]:
    """Each conversation sends a message, waits for the reply, then pauses (exponentially
    distributed, mean `pause` seconds: someone reading the answer) before the next one."""
    rng = random.Random(base)
    arrived: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
    original = telegram._m_sendMessage

    async def send_message(params: dict[str, Any]) -> Any:
        result = await original(params)
        arrived[int(params["chat_id"])].set()
        return result

    telegram._m_sendMessage = send_message  # type: ignore[method-assign]
    latencies: list[float] = []

    async def conversation(chat: int, http: aiohttp.ClientSession) -> None:
        for n in range(PER_CONVERSATION):
            if pause:
                await asyncio.sleep(rng.expovariate(1 / pause))
            arrived[chat].clear()
            update = telegram.message(chat_id=chat, user_id=chat, text=f"message {n}")
            started = time.perf_counter()
            async with http.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}
            ) as r:
                assert r.status == 200
            await asyncio.wait_for(arrived[chat].wait(), 30)
            latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200)) as http:
        started = time.perf_counter()
        await asyncio.gather(*(conversation(base + i, http) for i in range(concurrency)))
        wall = time.perf_counter() - started
    telegram._m_sendMessage = original  # type: ignore[method-assign]
    return latencies, wall


async def main() -> None:
    with throwaway_redis() as redis_url, tempfile.TemporaryDirectory() as logs:
        async with FakeTelegram() as telegram, FakeAnthropic() as hosted:
            hosted.responder = lambda body: fa.text("ok")
            port = free_port()
            base_env = {
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("PARLEY_", "ANTHROPIC_", "OLLAMA_", "TELEGRAM_", "SLACK_"))
            }
            env = {
                **base_env,
                "REDIS_URL": redis_url,
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "TELEGRAM_API_URL": telegram.url,
                "PARLEY_TELEGRAM_MODE": "webhook",
                "PARLEY_TELEGRAM_WEBHOOK_URL": f"http://127.0.0.1:{port}/telegram/webhook",
                "PARLEY_TELEGRAM_WEBHOOK_SECRET": SECRET,
                "ANTHROPIC_API_KEY": "sk-bench",
                "ANTHROPIC_BASE_URL": hosted.url,
                "PARLEY_RATE_LIMIT_PER_MINUTE": "100000",
                "PARLEY_WORKER_CONCURRENCY": "64",
                "PARLEY_LOG_LEVEL": "WARNING",
            }
            url = f"http://127.0.0.1:{port}/telegram/webhook"
            layouts = {
                "one `parley run`": [("run", port)],
                "1 gateway + 2 workers": [
                    ("gateway", port),
                    ("worker", free_port()),
                    ("worker", free_port()),
                ],
            }
            base = 10_000
            for name, layout in layouts.items():
                # The first process takes the webhooks; readiness is on its metrics port.
                metrics_port = free_port()
                processes = [
                    await start(
                        role,
                        {
                            **env,
                            "PARLEY_HTTP_PORT": str(p),
                            "PARLEY_METRICS_PORT": str(metrics_port if p == port else 0),
                        },
                        logs,
                    )
                    for role, p in layout
                ]
                try:
                    await wait_http(metrics_port)
                    await asyncio.sleep(2)  # workers load the embedding model
                    await measure(telegram, url, 5, base)  # warm-up
                    base += 100
                    for concurrency, pause in RUNS:
                        latencies, wall = await measure(
                            telegram, url, concurrency, base, pause=pause
                        )
                        base += 100
                        rate = len(latencies) / wall
                        how = f", pausing {pause:.1f} s between messages" if pause else ""
                        print(
                            f"{name}: {concurrency:>2} concurrent{how}: {describe(latencies)}, "
                            f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
                            f"{rate:.0f} objectives/s"
                        )
                finally:
                    for process in processes:
                        process.terminate()
                    for process in processes:
                        await process.wait()
    print("targets: p50 <= 20 ms and p99 <= 100 ms at 50 concurrent; >= 200 objectives/s")
