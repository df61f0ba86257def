"""The circuit breaker's state machine, in this process and shared through Redis, and the
fallback model with no Redis at all."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from agent.llm.anthropic import AnthropicModel
from agent.llm.breaker import BreakerPolicy, CircuitBreaker, LocalBreakerState
from agent.llm.breaker_redis import RedisBreakerState, redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.messages import ChatRequest, Message
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

KEY = "parley:breaker:anthropic"
POLICY = BreakerPolicy(failures=2, cooldown=30, max_cooldown=120, auth_cooldown=600)


class Kind:
    """Makes breakers over one state, and reads and ends the state's cooldown."""

    def __init__(self, name: str, redis: aioredis.Redis) -> None:
        self.name = name
        self.redis = redis
        self.local = LocalBreakerState()

    def breaker(self, policy: BreakerPolicy) -> CircuitBreaker:
        """A fresh breaker on the same state, as another process would have."""
        if self.name == "redis":
            return CircuitBreaker("anthropic", policy, state=RedisBreakerState(self.redis, KEY))
        return CircuitBreaker("anthropic", policy, state=self.local)

    async def open_for(self) -> float:
        if self.name == "redis":
            return float(await self.redis.hget(KEY, "open_until")) - time.time()
        return self.local.open_until - time.time()

    async def end_cooldown(self) -> None:
        if self.name == "redis":
            await self.redis.hset(KEY, "open_until", 0)
        else:
            self.local.open_until = 0.0


@pytest.fixture(params=["local", "redis"])
def kind(request: pytest.FixtureRequest, redis: aioredis.Redis) -> Kind:
    return Kind(request.param, redis)


async def test_the_breaker_opens_after_consecutive_failures_and_backs_off(kind: Kind) -> None:
    policy = BreakerPolicy(failures=2, cooldown=10, max_cooldown=25)
    breaker = kind.breaker(policy)
    await breaker.record_failure()
    assert await breaker.admit() == "probe"  # suspect: one request at a time tries it
    assert await breaker.admit() == "probing"
    await breaker.record_failure()
    assert await breaker.admit() == "open"
    first = await kind.open_for()
    await kind.end_cooldown()  # cooldown over, seen by a breaker new to it
    breaker = kind.breaker(policy)
    assert await breaker.admit() == "probe"
    assert await breaker.admit() == "probing"
    await breaker.record_failure()  # the probe failed: open again, longer
    second = await kind.open_for()
    await kind.end_cooldown()
    breaker = kind.breaker(policy)
    assert await breaker.admit() == "probe"
    await breaker.record_failure()
    third = await kind.open_for()
    assert 9 < first <= 10 and 19 < second <= 20 and 24 < third <= 25


async def test_a_success_between_failures_resets_the_count(kind: Kind) -> None:
    breaker = kind.breaker(BreakerPolicy(failures=2, cooldown=10))
    assert await breaker.admit() == "clean"  # nothing to reset: a success writes nothing
    await breaker.record_success("clean")
    assert not await kind.redis.exists(KEY)
    await breaker.record_failure()
    admission = await breaker.admit()
    assert admission == "probe"
    await breaker.record_success(admission)
    assert await breaker.admit() == "clean"
    await breaker.record_failure()
    assert await breaker.admit() == "probe"  # one failure since the success, not two


async def test_a_silent_call_becomes_the_one_probe(kind: Kind) -> None:
    breaker = kind.breaker(POLICY)
    assert await breaker.admit() == "clean"
    assert await breaker.suspect(30.0)  # the first silent call probes
    assert not await kind.breaker(POLICY).suspect(30.0)  # the next one gives up
    assert await kind.breaker(POLICY).admit() == "probing"
    await breaker.record_success("probe")
    assert await kind.breaker(POLICY).admit() == "clean"


async def test_a_retry_after_opens_at_once_capped_by_the_auth_cooldown(kind: Kind) -> None:
    breaker = kind.breaker(POLICY)
    await breaker.record_failure(cooldown=60)
    assert await breaker.admit() == "open"
    assert 55 < await kind.open_for() <= 60
    await kind.end_cooldown()
    await kind.breaker(POLICY).record_failure(cooldown=10_000)
    assert 595 < await kind.open_for() <= 600


async def test_an_open_breaker_is_known_without_asking_redis_each_time(redis) -> None:
    breaker = redis_breaker(redis, KEY, "anthropic", POLICY)
    await breaker.record_failure(cooldown=60)
    assert await breaker.admit() == "open"
    before = await redis.info("commandstats")
    for _ in range(20):
        assert await breaker.admit() == "open"
    after = await redis.info("commandstats")
    assert after == before | {"cmdstat_info": after["cmdstat_info"]}


async def test_a_breaker_opened_by_another_process_is_respected(redis, redis_url) -> None:
    script = (
        "import asyncio, redis.asyncio as r\n"
        "from agent.llm.breaker import BreakerPolicy\n"
        "from agent.llm.breaker_redis import redis_breaker\n"
        "async def main():\n"
        f"    c = r.Redis.from_url({redis_url!r})\n"
        f"    breaker = redis_breaker(c, {KEY!r}, 'anthropic', BreakerPolicy())\n"
        "    await breaker.record_failure(cooldown=30)\n"
        "    await c.aclose()\n"
        "asyncio.run(main())\n"
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    assert await asyncio.wait_for(process.wait(), 60) == 0
    assert await redis_breaker(redis, KEY, "anthropic", POLICY).admit() == "open"


async def test_a_clean_breaker_costs_one_round_trip_a_second_and_a_failure_ends_that(
    redis,
) -> None:
    breaker = redis_breaker(redis, KEY, "anthropic", POLICY)
    assert await breaker.admit() == "clean"
    before = await redis.info("commandstats")
    for _ in range(20):
        assert await breaker.admit() == "clean"
    after = await redis.info("commandstats")
    assert after == before | {"cmdstat_info": after["cmdstat_info"]}
    await breaker.record_failure()  # this process knows at once
    assert await breaker.admit() == "probe"
    await redis_breaker(redis, KEY, "anthropic", POLICY).record_success()
    assert await breaker.admit() == "clean"
    await redis_breaker(redis, KEY, "anthropic", POLICY).record_failure()  # elsewhere
    assert await breaker.admit() == "clean"  # not seen yet
    await asyncio.sleep(1.05)
    assert await breaker.admit() == "probe"  # seen within a second


@pytest.fixture
async def made() -> AsyncIterator[list[FallbackModel]]:
    models: list[FallbackModel] = []
    yield models
    for model in models:
        await model.close()


def embedded(hosted: FakeAnthropic, local: FakeOllama, made: list[FallbackModel]) -> FallbackModel:
    """A fallback model as an embedding program builds it: no breaker given, no Redis."""
    model = FallbackModel(
        AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url),
        OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096),
        timeout=5.0,
    )
    made.append(model)
    return model


def request() -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user("hello")])


async def test_the_fallback_keeps_its_breaker_in_process_by_default(
    redis: aioredis.Redis, hosted: FakeAnthropic, local: FakeOllama, made: list[FallbackModel]
) -> None:
    hosted.script(fa.error(429, retry_after=60))
    local.responder = lambda body: fo.reply("from ollama")
    model = embedded(hosted, local, made)
    assert isinstance(model.breaker.store, LocalBreakerState)
    for _ in range(4):
        assert (await model.complete(request())).provider == "ollama"
    assert len(hosted.message_calls) == 1  # the breaker opened for the retry-after
    assert 55 < model.breaker.store.open_until - time.time() <= 60
    assert await redis.dbsize() == 0


async def test_the_in_process_breaker_sends_one_probe_after_the_cooldown(
    hosted: FakeAnthropic, local: FakeOllama, made: list[FallbackModel]
) -> None:
    hosted.script(fa.error(529, retry_after=0.3))
    local.responder = lambda body: fo.reply("from ollama")
    model = embedded(hosted, local, made)
    await model.complete(request())
    await asyncio.sleep(0.35)
    hosted.script(fa.text("back", delay=0.3))
    first, second = await asyncio.gather(model.complete(request()), model.complete(request()))
    assert sorted([first.provider, second.provider]) == ["anthropic", "ollama"]
    assert len(hosted.message_calls) == 2
    hosted.script(fa.text("steady"))
    assert (await model.complete(request())).provider == "anthropic"


@pytest.mark.process
def test_the_agent_and_its_fallback_model_load_without_redis() -> None:
    code = (
        "import sys, agent, agent.llm.fallback\n"
        "loaded = [m for m in sys.modules if m == 'redis' or m.startswith('redis.')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
