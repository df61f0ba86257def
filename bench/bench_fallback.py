"""Fallback cost while the hosted model hangs: only the first call in a cooldown pays.

The hosted fake never answers; the breaker opens on the first timeout, so later think steps
go straight to Ollama. Compared with calling the Ollama fake directly, in the same run.
"""

from __future__ import annotations

import statistics
import time

import redis.asyncio as aioredis

from agent.llm.anthropic import AnthropicModel
from agent.llm.breaker import BreakerPolicy, CircuitBreaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.messages import ChatRequest, Message
from bench.support import throwaway_redis
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

TIMEOUT = 1.0
CALLS = 300


async def main() -> None:
    request = ChatRequest(system="You are Parley.", messages=[Message.user("hello")])
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url)
        async with FakeAnthropic() as hosted, FakeOllama() as local:
            hosted.responder = lambda body: fa.hang()
            local.responder = lambda body: fo.reply("from ollama")
            direct = OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096)
            model = FallbackModel(
                AnthropicModel(api_key="sk-bench", model="m", base_url=hosted.url, timeout=TIMEOUT),
                OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096),
                CircuitBreaker(
                    redis, "bench:breaker", "anthropic", BreakerPolicy(failures=1, cooldown=600)
                ),
                timeout=TIMEOUT + 0.5,
            )
            started = time.perf_counter()
            await model.complete(request)
            first = time.perf_counter() - started
            via_fallback, straight = [], []
            for _ in range(CALLS):  # interleaved so machine noise hits both alike
                started = time.perf_counter()
                await model.complete(request)
                via_fallback.append(time.perf_counter() - started)
                started = time.perf_counter()
                await direct.complete(request)
                straight.append(time.perf_counter() - started)
            await model.close()
            await direct.close()
        await redis.aclose()
    fallback_ms = statistics.median(via_fallback) * 1000
    direct_ms = statistics.median(straight) * 1000
    print(f"first call (pays the {TIMEOUT:.1f} s timeout): {first * 1000:.0f} ms")
    print(f"later calls, breaker open: median {fallback_ms:.2f} ms over {CALLS}")
    print(f"Ollama called directly:    median {direct_ms:.2f} ms over {CALLS}")
    print(f"added by the fallback path: {fallback_ms - direct_ms:.2f} ms (target <= 5 ms)")
    print(f"hosted requests during the cooldown: {len(hosted.message_calls) - 1}")
