"""The breaker through streamed answers: a streamed success counts as one, however the caller
stops reading, and operators see when and why calls went to the fallback.

The real anthropic SDK against the fake Messages API, the real ollama client against the fake
Ollama, the breaker's state in a real Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from agent.builtin_tools import builtin_registry
from agent.llm.anthropic import AnthropicModel
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import RedisBreakerState, redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.llm.streaming import StreamEvent
from agent.loop import Agent
from agent.messages import ChatRequest, ChatResponse, Message
from agent.outcomes import Finished
from agent.protocols import ProgressEvent, RunContext
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

# every scenario once more against the current generation, in strict mode
STRICT_TOO = True

KEY = "parley:breaker:anthropic"
CONTEXT = RunContext(conversation_id="c", platform="console", user_id="u", chat_id="c")


@pytest.fixture
async def model(
    redis: aioredis.Redis, hosted: FakeAnthropic, local: FakeOllama
) -> AsyncIterator[FallbackModel]:
    made = FallbackModel(
        AnthropicModel(api_key="sk-ant-test", model=hosted.model, base_url=hosted.url),
        OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096),
        redis_breaker(redis, KEY, "anthropic", BreakerPolicy()),  # the service's defaults
        timeout=5.0,
    )
    yield made
    await made.close()


async def first_whole(events: AsyncIterator[StreamEvent]) -> ChatResponse:
    """Read a stream the way the loop does: stop (and close it) at the whole response."""
    async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
        async for event in stream:
            if isinstance(event, ChatResponse):
                return event
    raise AssertionError("no response")


def ask(text: str) -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user(text)])


async def test_one_failure_then_ten_streamed_answers_all_come_from_anthropic(
    redis, hosted, local, model
) -> None:
    """The probe after a failure is a streamed answer that the caller closes as soon as it
    has it; that success closes the breaker, so no later call waits out a probe window."""
    hosted.script(fa.error(529))  # no retry-after: one failure, the breaker stays closed
    local.responder = lambda body: fo.reply("from ollama")
    first = await first_whole(model.stream(ask("first")))
    assert first.provider == "ollama"
    hosted.responder = lambda body: fa.streamed("from claude", chunk=4)
    providers = [(await first_whole(model.stream(ask(f"q{i}")))).provider for i in range(10)]
    assert providers == ["anthropic"] * 10
    assert local.count("/api/chat") == 1
    status = await RedisBreakerState(redis, KEY).status()
    assert (status.state, status.failures, status.probe_for) == ("closed", 0, 0.0)


async def test_ten_streamed_agent_runs_after_one_failure_all_come_from_anthropic(
    redis, hosted, local, model
) -> None:
    """The same through the agent loop with someone watching (so every step streams)."""
    seen: list[ProgressEvent] = []

    async def watch(event: ProgressEvent) -> None:
        seen.append(event)

    agent = Agent(model, builtin_registry(), on_progress=watch)
    hosted.script(fa.error(529))
    local.responder = lambda body: fo.reply("from ollama")
    assert isinstance(await agent.run("first", CONTEXT), Finished)
    hosted.responder = lambda body: fa.streamed("from claude")
    for number in range(10):
        outcome = await agent.run(f"question {number}", CONTEXT)
        assert isinstance(outcome, Finished) and outcome.answer == "from claude"
    assert local.count("/api/chat") == 1 and len(hosted.message_calls) == 11
    assert any(event.kind == "text_delta" for event in seen)


async def test_a_probe_the_caller_stops_reading_midway_still_frees_the_probe_slot(
    redis, hosted, local, model
) -> None:
    """A person pressing stop while the probe's answer streams: the provider was answering,
    so it is up, and the next call does not wait out the probe window on the fallback."""
    hosted.script(fa.error(529), fa.streamed("a long answer that is cut off", chunk=3))
    local.responder = lambda body: fo.reply("from ollama")
    await first_whole(model.stream(ask("first")))
    async with contextlib.aclosing(model.stream(ask("second"))) as stream:
        await anext(stream)  # the first delta; then the caller walks away
    hosted.script(fa.streamed("third"))
    assert (await first_whole(model.stream(ask("third")))).provider == "anthropic"


async def test_operators_see_when_and_why_calls_went_to_the_fallback(
    redis, hosted, local, model
) -> None:
    """`parley breaker` and `/readyz` print `describe()`: a probe window in which other
    calls go to the fallback says so, and so does the latest fallback; the metrics count
    each by reason and keep the time of the latest."""
    before = REGISTRY.get_sample_value("parley_model_fallbacks_total", {"reason": "probing"})
    streaming, release = asyncio.Event(), asyncio.Event()

    async def gate(number: int) -> None:
        streaming.set()
        await release.wait()

    hosted.script(fa.error(529), fa.streamed("slow answer", gate=gate))
    local.responder = lambda body: fo.reply("from ollama")
    await first_whole(model.stream(ask("first")))  # one failure: the next call probes
    probe = asyncio.create_task(first_whole(model.stream(ask("probe"))))
    await asyncio.wait_for(streaming.wait(), 5)
    assert (await first_whole(model.stream(ask("meanwhile")))).provider == "ollama"
    text = (await RedisBreakerState(redis, KEY).status()).describe()
    assert "probing" in text and "the others go to the fallback" in text
    assert "last failure: HTTP 529" in text
    assert "another request was probing the hosted model" in text
    release.set()
    assert (await probe).provider == "anthropic"
    after = REGISTRY.get_sample_value("parley_model_fallbacks_total", {"reason": "probing"})
    assert (after or 0) - (before or 0) == 1
    stamp = REGISTRY.get_sample_value(
        "parley_model_fallback_last_timestamp_seconds", {"reason": "probing"}
    )
    assert stamp is not None and stamp > 0
    assert (await RedisBreakerState(redis, KEY).status()).describe().startswith("closed;")
