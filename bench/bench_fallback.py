"""Fallback cost while the hosted model hangs: only the first request should pay the timeout.

The model is built as `parley run` builds it (`build_chat_model`, shipped breaker defaults:
three failures to open), with the hosted timeout and the suspicion threshold both scaled down
tenfold (30 s → 3 s, 10 s → 1 s) to keep the bench short. 20 conversations send 5 messages
each, at once, while the hosted fake never answers: how many of the 100 requests paid the
timeout? Then, with the breaker open, the fallback path is compared with calling its Ollama
client directly, interleaved in the same run.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import redis.asyncio as aioredis

from agent.llm.fallback import FallbackModel
from agent.llm.usage import close_model
from agent.messages import ChatRequest, Message
from bench.support import bench_line, throwaway_redis
from bot.config import Settings
from bot.wiring.models import build_chat_model
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

TIMEOUT = 3.0
SUSPECT_AFTER = 1.0
CONVERSATIONS = 20
PER_CONVERSATION = 5
CALLS = 300


async def main() -> None:
    request = ChatRequest(system="You are Parley.", messages=[Message.user("hello")])
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url)
        async with FakeAnthropic() as hosted, FakeOllama() as local:
            hosted.responder = lambda body: fa.hang()
            local.responder = lambda body: fo.reply("from ollama")
            settings = Settings.load(
                env_file=None,
                anthropic={"api_key": "sk-bench", "base_url": hosted.url},
                ollama={"host": local.url},
                llm={"timeout": TIMEOUT, "suspect_after": SUSPECT_AFTER},
            )
            model = build_chat_model(settings, redis)
            assert isinstance(model, FallbackModel)
            # The same Ollama client the fallback uses, called directly: its connection pool
            # (left with ~20 connections by the burst) costs both sides alike.
            direct = model.fallback

            async def timed() -> float:
                started = time.perf_counter()
                await model.complete(request)
                return time.perf_counter() - started

            hosted.script(fa.text("warm"))  # a running service has called it before
            await model.complete(request)

            async def conversation() -> list[float]:
                return [await timed() for _ in range(PER_CONVERSATION)]

            started = time.perf_counter()
            waves = await asyncio.gather(*(conversation() for _ in range(CONVERSATIONS)))
            wall = time.perf_counter() - started
            latencies = [t for wave in waves for t in wave]
            paid = sum(t >= TIMEOUT for t in latencies)
            breaker = await redis.hget(f"{settings.redis.key_prefix}:breaker:anthropic", "state")

            via_fallback, straight = [], []
            for _ in range(CALLS):  # interleaved so machine noise hits both alike
                via_fallback.append(await timed())
                started = time.perf_counter()
                await direct.complete(request)
                straight.append(time.perf_counter() - started)
            await close_model(model)
        await redis.aclose()
    fallback_ms = statistics.median(via_fallback) * 1000
    direct_ms = statistics.median(straight) * 1000
    added = fallback_ms - direct_ms
    total = CONVERSATIONS * PER_CONVERSATION
    print(
        f"{CONVERSATIONS} conversations x {PER_CONVERSATION} at once, hosted hanging "
        f"(timeout {TIMEOUT:.0f} s, suspicion {SUSPECT_AFTER:.0f} s): {paid} of {total} paid the "
        f"timeout; all done in {wall:.1f} s; breaker {(breaker or b'closed').decode()}"
    )
    print(f"breaker open: via the fallback median {fallback_ms:.2f} ms over {CALLS}")
    print(f"Ollama called directly:      median {direct_ms:.2f} ms over {CALLS}")
    print(f"added by the fallback path: {added:.2f} ms")
    bench_line(
        "fallback",
        ok=paid <= 3 and added <= 5.0,
        paid_timeout=f"{paid}/{total}",
        goal_paid="<=3",
        added_ms=f"{added:.2f}",
        goal_added_ms="<=5",
    )
