"""Telegram sends: CPU per sendMessage on our aiohttp transport against PTB's default httpx one.

The same python-telegram-bot `Bot` sends 2,000 messages, 32 at a time, through
`adapters.telegram.http.AiohttpRequest` and through PTB's own `HTTPXRequest` (both with 32
connections). A minimal Bot API server answers in a process of its own (this module run with
`serve`), so the CPU measured (`time.process_time`) is the sending side's alone. A third run
puts the adapter's `RateLimiter` (PTB's `AIORateLimiter`) on the aiohttp transport, to show
what the limiter costs per send. The transports alternate over three rounds and each
figure is the rounds' median. Goal: the aiohttp transport costs at most half the CPU of
httpx's (it was measured at about 7x less), and the limiter adds at most 50%.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

from aiohttp import web

from bench.support import bench_line

SENDS = 2_000
CONCURRENCY = 32
ROUNDS = 3
TOKEN = "123456:BENCH-token"
TIME_LIMIT = 300.0


async def serve() -> None:
    """A Bot API that answers sendMessage at once; prints its URL, serves until stdin closes."""
    counter = 0

    async def method(request: web.Request) -> web.Response:
        nonlocal counter
        if request.match_info["method"] == "getMe":
            me = {"id": 1, "is_bot": True, "first_name": "Parley", "username": "parley_bot"}
            return web.json_response({"ok": True, "result": me})
        form = await request.post()
        counter += 1
        message = {
            "message_id": counter,
            "date": 0,
            "chat": {"id": int(str(form.get("chat_id") or 1)), "type": "private"},
            "text": str(form.get("text") or ""),
        }
        return web.json_response({"ok": True, "result": message})

    app = web.Application()
    app.router.add_post(f"/bot{TOKEN}/{{method}}", method)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(json.dumps({"url": f"http://127.0.0.1:{port}"}), flush=True)
    await asyncio.to_thread(sys.stdin.read)
    await runner.cleanup()


async def cpu_per_send(url: str, transport: str) -> float:
    """Seconds of this process's CPU per sendMessage, 32 at a time."""
    from telegram import Bot
    from telegram.ext import ExtBot
    from telegram.request import BaseRequest, HTTPXRequest

    from adapters.telegram.delivery import RateLimiter
    from adapters.telegram.http import AiohttpRequest

    request: BaseRequest = (
        HTTPXRequest(connection_pool_size=CONCURRENCY)
        if transport == "httpx"
        else AiohttpRequest(connection_pool_size=CONCURRENCY)
    )
    bot: Bot
    if transport == "aiohttp+limiter":
        limiter = RateLimiter(max_retries=3, max_wait=60.0)
        bot = ExtBot(TOKEN, base_url=f"{url}/bot", request=request, rate_limiter=limiter)
    else:
        bot = Bot(TOKEN, base_url=f"{url}/bot", request=request)
    await bot.initialize()
    queue: asyncio.Queue[int] = asyncio.Queue()

    async def sender() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            await bot.send_message(chat_id=1000 + n % 500, text=f"reply number {n}")

    async def run(count: int) -> float:
        for n in range(count):
            queue.put_nowait(n)
        started = time.process_time()
        async with asyncio.timeout(TIME_LIMIT):
            await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        return (time.process_time() - started) / count

    try:
        await run(200)  # warm-up: connections, imports, caches
        return await run(SENDS)
    finally:
        await bot.shutdown()


async def main() -> None:
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.bench_telegram_transport",
        "serve",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        url = json.loads(await server.stdout.readline())["url"]
        figures: dict[str, list[float]] = {"aiohttp": [], "httpx": [], "aiohttp+limiter": []}
        for _ in range(ROUNDS):
            for transport in figures:
                figures[transport].append(await cpu_per_send(url, transport))
        medians: dict[str, Any] = {k: statistics.median(v) for k, v in figures.items()}
        for transport, value in medians.items():
            print(f"{transport:>16}: {value * 1e6:8.1f} µs CPU per send")
        ratio = medians["httpx"] / medians["aiohttp"]
        limiter = medians["aiohttp+limiter"] / medians["aiohttp"] - 1
        print(
            f"httpx costs {ratio:.1f}x the CPU of aiohttp per send at {CONCURRENCY} concurrent "
            f"sends; the rate limiter adds {limiter * 100:.0f}% on aiohttp"
        )
    finally:
        server.stdin.close()
        await server.wait()
    ok = ratio >= 2.0 and limiter <= 0.5
    bench_line(
        "telegram_transport",
        ok=ok,
        cpu_ratio=f"{ratio:.2f}",
        aiohttp_us=f"{medians['aiohttp'] * 1e6:.0f}",
        httpx_us=f"{medians['httpx'] * 1e6:.0f}",
        limiter_overhead_pct=f"{limiter * 100:.0f}",
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        asyncio.run(serve())
    else:
        asyncio.run(main())
