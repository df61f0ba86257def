from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from agent.builtin_tools import builtin_registry
from agent.llm.anthropic import AnthropicModel
from agent.llm.base import AllProvidersFailed, ProviderRejected
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.loop import Agent
from agent.messages import ChatRequest, Message
from agent.outcomes import Failed, Finished
from agent.protocols import RunContext
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

# every scenario once more against the current generation, in strict mode
STRICT_TOO = True

KEY = "parley:breaker:anthropic"
POLICY = BreakerPolicy(failures=2, cooldown=30, max_cooldown=120, auth_cooldown=600)


def request(text: str = "hello") -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user(text)])


@pytest.fixture
async def models(
    redis: aioredis.Redis, hosted: FakeAnthropic, local: FakeOllama
) -> AsyncIterator[list[FallbackModel]]:
    made: list[FallbackModel] = []
    yield made
    for model in made:
        await model.close()


def fallback(
    redis: aioredis.Redis,
    hosted: FakeAnthropic,
    local: FakeOllama,
    made: list[FallbackModel],
    *,
    timeout: float = 5.0,
    policy: BreakerPolicy = POLICY,
    suspect_after: float | None = None,
) -> FallbackModel:
    model = FallbackModel(
        AnthropicModel(
            api_key="sk-ant-test", model=hosted.model, base_url=hosted.url, timeout=timeout
        ),
        OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096),
        redis_breaker(redis, KEY, "anthropic", policy),
        timeout=timeout + 1,
        suspect_after=suspect_after,
    )
    made.append(model)
    return model


async def test_hosted_answers_while_healthy(redis, hosted, local, models) -> None:
    hosted.script(fa.text("from claude"))
    response = await fallback(redis, hosted, local, models).complete(request())
    assert response.provider == "anthropic" and local.count("/api/chat") == 0


async def test_429_with_retry_after_falls_back_and_skips_hosted_for_the_window(
    redis, hosted, local, models
) -> None:
    hosted.script(fa.error(429, retry_after=60))
    local.responder = lambda body: fo.reply("from ollama")
    model = fallback(redis, hosted, local, models)
    assert (await model.complete(request())).provider == "ollama"
    for _ in range(5):
        assert (await model.complete(request())).provider == "ollama"
    assert len(hosted.message_calls) == 1
    ttl_until = float(await redis.hget(KEY, "open_until"))
    assert 55 < ttl_until - time.time() <= 60


@pytest.mark.parametrize("status", [529, 500])
async def test_overload_and_server_errors_fall_back(redis, hosted, local, models, status) -> None:
    hosted.script(fa.error(status))
    local.script(fo.reply("from ollama"))
    response = await fallback(redis, hosted, local, models).complete(request())
    assert response.provider == "ollama" and response.message.text == "from ollama"


async def test_a_hung_hosted_server_falls_back_within_the_timeout(
    redis, hosted, local, models
) -> None:
    hosted.script(fa.hang())
    local.script(fo.reply("from ollama"))
    model = fallback(redis, hosted, local, models, timeout=0.5)
    started = time.monotonic()
    response = await model.complete(request())
    elapsed = time.monotonic() - started
    assert response.provider == "ollama"
    assert 0.5 <= elapsed < 0.5 + 0.5


async def test_a_bad_request_is_surfaced_not_hidden(redis, hosted, local, models) -> None:
    hosted.script(fa.error(400, message="messages: roles must alternate"))
    with pytest.raises(ProviderRejected, match="roles must alternate"):
        await fallback(redis, hosted, local, models).complete(request())
    assert local.count("/api/chat") == 0


async def test_auth_failure_falls_back_logs_an_error_and_opens_for_long(
    redis, hosted, local, models, caplog
) -> None:
    hosted.script(fa.error(401))
    local.responder = lambda body: fo.reply("from ollama")
    model = fallback(redis, hosted, local, models)
    with caplog.at_level(logging.ERROR):
        assert (await model.complete(request())).provider == "ollama"
    assert any(
        r.levelno == logging.ERROR and "credentials" in r.getMessage() for r in caplog.records
    )
    assert float(await redis.hget(KEY, "open_until")) - time.time() > 500
    await model.complete(request())
    assert len(hosted.message_calls) == 1


async def test_half_open_lets_one_probe_through_and_success_closes(
    redis, hosted, local, models
) -> None:
    hosted.script(fa.error(529, retry_after=0.3))
    local.responder = lambda body: fo.reply("from ollama")
    model = fallback(redis, hosted, local, models)
    await model.complete(request())
    await asyncio.sleep(0.35)
    hosted.script(fa.text("back", delay=0.3))
    first, second = await asyncio.gather(model.complete(request()), model.complete(request()))
    providers = sorted([first.provider, second.provider])
    assert providers == ["anthropic", "ollama"]  # one probe, the other skipped
    assert len(hosted.message_calls) == 2
    assert (await redis.hget(KEY, "state")) == b"closed"
    hosted.script(fa.text("steady"))
    assert (await model.complete(request())).provider == "anthropic"


async def test_two_instances_share_the_breaker(redis, redis_url, hosted, local, models) -> None:
    hosted.script(fa.error(429, retry_after=60))
    local.responder = lambda body: fo.reply("from ollama")
    other_client = aioredis.Redis.from_url(redis_url)
    try:
        one = fallback(redis, hosted, local, models)
        two = fallback(other_client, hosted, local, models)
        await one.complete(request())
        assert (await two.complete(request())).provider == "ollama"
        assert len(hosted.message_calls) == 1
    finally:
        await other_client.aclose()


async def test_both_down_fails_kindly(redis, hosted, local, models) -> None:
    hosted.script(fa.error(500))
    local.script(fo.failure(500))
    model = fallback(redis, hosted, local, models)
    with pytest.raises(AllProvidersFailed) as caught:
        await model.complete(request())
    assert len(caught.value.causes) == 2

    hosted.script(fa.error(500))
    local.script(fo.failure(500))
    agent = Agent(model, builtin_registry())
    context = RunContext(conversation_id="c", platform="console", user_id="u", chat_id="c")
    outcome = await agent.run("hi", context)
    assert isinstance(outcome, Failed) and outcome.reason == "model_error"
    assert "500" not in outcome.message and "Error" not in outcome.message
    assert len(outcome.message) < 200


async def test_a_tool_call_round_trips_through_the_agent_on_ollama(
    redis, hosted, local, models
) -> None:
    hosted.script(fa.error(529, retry_after=30))
    local.script(fo.call("calculator", expression="6*7"), fo.reply("It is 42."))
    agent = Agent(fallback(redis, hosted, local, models), builtin_registry())
    context = RunContext(conversation_id="c", platform="console", user_id="u", chat_id="c")
    outcome = await agent.run("what is 6*7?", context)
    assert isinstance(outcome, Finished) and outcome.answer == "It is 42."
    tool_message = local.calls("/api/chat")[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "42" in tool_message["content"]


async def test_the_breaker_lets_calls_through_while_its_redis_is_unreachable(
    hosted, local, models
) -> None:
    import socket

    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    away = aioredis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    try:
        hosted.script(fa.text("from claude"), fa.error(529))
        local.responder = lambda body: fo.reply("from ollama")
        model = fallback(away, hosted, local, models)
        assert (await model.complete(request())).provider == "anthropic"
        assert (await model.complete(request())).provider == "ollama"  # still falls back
    finally:
        await away.aclose()


async def _warm(model: FallbackModel, hosted: FakeAnthropic) -> None:
    """One answered call first: the SDK's first request does slow one-off set-up work."""
    hosted.script(fa.text("warm"))
    assert (await model.complete(request())).provider == "anthropic"
    hosted.requests.clear()


def paid_the_timeout() -> float:
    """Think steps that waited for the hosted timeout before the fallback answered."""
    return sum(
        REGISTRY.get_sample_value("parley_model_fallbacks_total", {"reason": reason}) or 0.0
        for reason in ("unavailable", "timeout")  # the SDK's timeout, or our own
    )


async def _timed(model: FallbackModel) -> tuple[float, str]:
    started = time.monotonic()
    response = await model.complete(request())
    return time.monotonic() - started, response.provider


async def test_a_hanging_provider_holds_one_request_of_many_for_its_timeout(
    redis, hosted, local, models
) -> None:
    hosted.responder = lambda body: fa.hang()
    local.responder = lambda body: fo.reply("from ollama")
    # a timeout well clear of the ~1 s of CPU the 100 calls take on a busy machine
    model = fallback(
        redis, hosted, local, models, timeout=2.5, policy=BreakerPolicy(), suspect_after=0.2
    )
    await _warm(model, hosted)

    async def conversation() -> list[tuple[float, str]]:
        return [await _timed(model) for _ in range(5)]

    before = paid_the_timeout()
    results = [r for rs in await asyncio.gather(*(conversation() for _ in range(20))) for r in rs]
    assert len(results) == 100 and all(provider == "ollama" for _, provider in results)
    assert paid_the_timeout() - before == 1  # the probe; the other 19 first calls gave up
    assert sum(elapsed >= 2.5 for elapsed, _ in results) >= 1
    # then one probe at a time, each given up after 0.2 s, until three failures open it
    assert 20 <= len(hosted.message_calls) <= 22


async def test_after_a_timeout_probes_go_one_at_a_time_with_less_patience(
    redis, hosted, local, models
) -> None:
    hosted.responder = lambda body: fa.hang()
    local.responder = lambda body: fo.reply("from ollama")
    model = fallback(
        redis, hosted, local, models, timeout=2.0, policy=BreakerPolicy(), suspect_after=0.1
    )
    await _warm(model, hosted)
    before = paid_the_timeout()
    durations = await asyncio.gather(*(_timed(model) for _ in range(5)))
    assert paid_the_timeout() - before == 1
    assert len(hosted.message_calls) == 5  # the first five went out together
    for probe in (1, 2):  # the shipped threshold: the second and third failure open it
        durations = await asyncio.gather(*(_timed(model) for _ in range(5)))
        assert all(provider == "ollama" for _, provider in durations)
        assert paid_the_timeout() - before == 1  # the probe gave up after 0.1 s
        assert len(hosted.message_calls) == 5 + probe
    assert await redis.hget(KEY, "state") == b"open"
    elapsed, provider = await _timed(model)
    assert provider == "ollama" and len(hosted.message_calls) == 7
    assert paid_the_timeout() - before == 1


async def test_a_slow_answer_from_the_probe_is_used_and_clears_the_suspicion(
    redis, hosted, local, models
) -> None:
    hosted.script(fa.text("slow but fine", delay=0.5), fa.text("quick"))
    model = fallback(redis, hosted, local, models, timeout=5.0, suspect_after=0.1)
    response = await model.complete(request())
    assert response.provider == "anthropic" and response.message.text == "slow but fine"
    assert await model.breaker.admit() == "clean"
    assert (await model.complete(request())).message.text == "quick"


async def test_a_slow_bad_request_from_the_probe_clears_the_suspicion(
    redis, hosted, local, models
) -> None:
    slow_refusal = dataclasses.replace(fa.error(400, message="bad request"), delay=0.5)
    hosted.script(slow_refusal, fa.text("quick"))
    model = fallback(redis, hosted, local, models, timeout=5.0, suspect_after=0.1)
    with pytest.raises(ProviderRejected):
        await model.complete(request())
    assert await model.breaker.admit() == "clean"  # nobody is sent to the fallback for it
    assert (await model.complete(request())).message.text == "quick"


async def test_suspicion_is_shared_by_every_process(
    redis, redis_url, hosted, local, models
) -> None:
    hosted.responder = lambda body: fa.hang()
    local.responder = lambda body: fo.reply("from ollama")
    other_client = aioredis.Redis.from_url(redis_url)
    try:
        one, two = (
            fallback(
                client,
                hosted,
                local,
                models,
                timeout=2.0,
                policy=BreakerPolicy(),
                suspect_after=0.2,
            )
            for client in (redis, other_client)
        )
        for model in (one, two):
            await _warm(model, hosted)
        before = paid_the_timeout()
        results = await asyncio.gather(*(_timed(m) for m in (one, two) for _ in range(4)))
        assert paid_the_timeout() - before == 1
        assert all(provider == "ollama" for _, provider in results)
    finally:
        await other_client.aclose()
