"""Streaming providers against the fake Anthropic (SSE) and Ollama (NDJSON) servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from agent.llm.anthropic import AnthropicModel
from agent.llm.base import AllProvidersFailed, ProviderRejected, ProviderUnavailable
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import redis_breaker
from agent.llm.fallback import FINISHED_BY_FALLBACK, FallbackModel
from agent.llm.ollama import OllamaModel
from agent.llm.streaming import (
    CONTINUE_PROMPT,
    StreamEvent,
    StreamReset,
    TextDelta,
    ThinkingDelta,
    ToolUseStarted,
)
from agent.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

# every scenario once more against the current generation, in strict mode
STRICT_TOO = True
NOT_STRICT = {
    "test_a_tool_call_with_an_integer_past_64_bits_goes_back_exactly": (
        "a tool turn without thinking goes to the current generation as text, not as tool_use"
    ),
}

KEY = "parley:breaker:anthropic"
CALC = ToolSpec(
    name="calculator",
    description="Evaluate arithmetic.",
    input_schema={"type": "object", "properties": {"expression": {"type": "string"}}},
)
ANSWER = "The answer is forty-two, as computed just now."


def request() -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user("hi")], tools=[CALC])


@pytest.fixture
async def closing() -> AsyncIterator[list[object]]:
    made: list[object] = []
    yield made
    for model in made:
        await model.close()  # type: ignore[attr-defined]


def hosted_model(fake: FakeAnthropic, made: list[object], timeout: float = 5.0) -> AnthropicModel:
    model = AnthropicModel(
        api_key="sk-ant-test", model=fake.model, base_url=fake.url, timeout=timeout
    )
    made.append(model)
    return model


def local_model(fake: FakeOllama, made: list[object]) -> OllamaModel:
    model = OllamaModel(host=fake.url, model="qwen2.5:7b", num_ctx=4096)
    made.append(model)
    return model


def fallback(redis, hosted, local, made, *, timeout: float = 5.0) -> FallbackModel:
    model = FallbackModel(
        hosted_model(hosted, [], timeout=timeout),
        local_model(local, []),
        redis_breaker(redis, KEY, "anthropic", BreakerPolicy(failures=2)),
        timeout=timeout,
    )
    made.append(model)
    return model


async def collect(events: AsyncIterator[StreamEvent]) -> tuple[list[StreamEvent], ChatResponse]:
    seen = [event async for event in events]
    assert isinstance(seen[-1], ChatResponse), "a stream ends with the whole response"
    return seen[:-1], seen[-1]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def said(events: list[StreamEvent]) -> str:
    """What the model wrote before a tool call: text on 4.x, a thinking note on 5.5."""
    return text_of(events) or "".join(e.text for e in events if isinstance(e, ThinkingDelta))


async def test_anthropic_streams_text_deltas_then_the_whole_response(hosted, closing) -> None:
    hosted.script(fa.streamed(ANSWER, chunk=5))
    events, response = await collect(hosted_model(hosted, closing).stream(request()))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == len(range(0, len(ANSWER), 5)) and text_of(events) == ANSWER
    assert response.message.text == ANSWER and response.stop_reason == "end_turn"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens == 7  # as billed
    assert hosted.message_calls[-1].body["stream"] is True


async def test_anthropic_stream_announces_a_tool_call_and_assembles_its_input(
    hosted, closing
) -> None:
    hosted.script(fa.tool("calculator", thought="Let me compute.", expression="6*7"))
    events, response = await collect(hosted_model(hosted, closing).stream(request()))
    assert said(events) == "Let me compute."
    assert ToolUseStarted("calculator") in events
    assert response.stop_reason == "tool_use"
    assert response.message.tool_uses[0].input == {"expression": "6*7"}


async def test_anthropic_sends_the_same_request_whether_traced_or_not(hosted, closing) -> None:
    """Untraced calls post the body as JSON through the SDK's generic post; traced ones go
    through `messages.create`, which records the span. The API must see no difference."""
    turns = [Message.user('Grüße, 東京 🙂 "quoted" \\ and\nnewline'), Message.assistant("ok")]
    ask = ChatRequest(
        system="You are Parley.", messages=[*turns, Message.user("6*7?")], tools=[CALC]
    )
    results = []
    for traced in (False, True):
        model = hosted_model(hosted, closing)
        model.traced = traced
        hosted.script(fa.tool("calculator", thought="Let me compute.", expression="6*7"))
        results.append(await collect(model.stream(ask)))
    plain, typed = hosted.message_calls[-2:]
    assert plain.body == typed.body and plain.body["stream"] is True
    assert plain.headers.pop("Host") and typed.headers.pop("Host")  # each its own connection
    assert plain.headers == typed.headers and plain.headers["Content-Type"] == "application/json"
    (events, response), (typed_events, typed_response) = results
    assert events == typed_events and response.stop_reason == typed_response.stop_reason
    assert response.usage == typed_response.usage and response.usage.output_tokens
    assert said(events) == said(typed_events) == "Let me compute."
    assert (
        [(u.name, u.input) for u in response.message.tool_uses]
        == [(u.name, u.input) for u in typed_response.message.tool_uses]
        == [("calculator", {"expression": "6*7"})]
    )


async def test_a_tool_call_with_an_integer_past_64_bits_goes_back_exactly(hosted, closing) -> None:
    """The body is written by orjson, and by json where orjson refuses (past 64 bits): a
    model's odd tool call must not make every later request of the conversation fail."""
    huge = 2**70 + 1
    call = ToolUseBlock(id="toolu_1", name="calculator", input={"expression": "x", "n": huge})
    turns = [
        Message.user("what is x?"),
        Message(role="assistant", content=[call]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="toolu_1", content="42")]),
    ]
    hosted.script(fa.text("It is 42."))
    _, response = await collect(
        hosted_model(hosted, closing).stream(
            ChatRequest(system="You are Parley.", messages=turns, tools=[CALC])
        )
    )
    assert response.message.text == "It is 42."
    sent = hosted.message_calls[-1].body["messages"][1]["content"][0]
    assert sent["input"] == {"expression": "x", "n": huge}


async def test_anthropic_error_event_midway_counts_as_unavailable(hosted, closing) -> None:
    hosted.script(fa.broken("Partial answ", "overloaded_error"))
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderUnavailable):
        async for event in hosted_model(hosted, closing).stream(request()):
            seen.append(event)
    assert text_of(seen) == "Partial answ"


async def test_anthropic_stream_refused_at_start_is_classified(hosted, closing) -> None:
    hosted.script(fa.error(400, message="bad"))
    with pytest.raises(ProviderRejected):
        await collect(hosted_model(hosted, closing).stream(request()))


async def test_ollama_streams_with_stream_true(local, closing) -> None:
    local.script(fo.reply(ANSWER))
    events, response = await collect(local_model(local, closing).stream(request()))
    assert len([e for e in events if isinstance(e, TextDelta)]) > 1
    assert text_of(events) == ANSWER and response.message.text == ANSWER
    assert response.provider == "ollama" and response.usage.output_tokens == 9
    assert local.calls("/api/chat")[-1].body["stream"] is True


async def test_ollama_stream_carries_tool_calls(local, closing) -> None:
    local.script(fo.call("calculator", expression="1+1"))
    events, response = await collect(local_model(local, closing).stream(request()))
    assert ToolUseStarted("calculator") in events
    assert response.stop_reason == "tool_use"
    assert response.message.tool_uses[0].input == {"expression": "1+1"}


async def test_fallback_decides_before_the_first_token(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    hosted.script(fa.error(529))
    local.script(fo.reply(ANSWER))
    events, response = await collect(fallback(redis, hosted, local, closing).stream(request()))
    assert not any(isinstance(e, StreamReset) for e in events)
    assert text_of(events) == ANSWER and response.provider == "ollama"


async def test_a_streamed_hosted_model_that_comes_back_is_used_again(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    """Streams over the generic post, through an outage: a 529 sends the run to the
    fallback, and once the retry-after has passed one probe finds the model back."""
    hosted.script(fa.error(529, retry_after=0.3))
    local.responder = lambda body: fo.reply("from ollama")
    model = fallback(redis, hosted, local, closing)
    _, during = await collect(model.stream(request()))
    assert during.provider == "ollama"
    await asyncio.sleep(0.35)
    hosted.script(fa.streamed("back again"))
    events, after = await collect(model.stream(request()))
    assert after.provider == "anthropic" and text_of(events) == "back again"
    assert (await redis.hget(KEY, "state")) == b"closed"


async def test_hosted_stream_dying_midway_is_kept_and_finished_by_the_fallback(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    hosted.script(fa.broken("Half of the hosted", "api_error"))
    local.script(fo.reply(" answer, finished locally."))
    events, response = await collect(fallback(redis, hosted, local, closing).stream(request()))
    assert not any(isinstance(e, StreamReset) for e in events)  # the shown text stays
    whole = "Half of the hosted" + FINISHED_BY_FALLBACK + " answer, finished locally."
    assert text_of(events) == whole and response.message.text == whole
    assert response.provider == "ollama" and response.stop_reason == "end_turn"
    sent = local.calls("/api/chat")[-1].body["messages"]
    assert sent[-2] == {"role": "assistant", "content": "Half of the hosted"}
    assert sent[-1] == {"role": "user", "content": CONTINUE_PROMPT}
    assert await redis.hget(KEY, "failures") == b"1"


async def test_a_cut_answer_the_fallback_cannot_finish_ends_as_cut(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    hosted.script(fa.broken("Half of the hosted", "api_error"))
    local.script(fo.failure(500))
    events, response = await collect(fallback(redis, hosted, local, closing).stream(request()))
    assert text_of(events) == "Half of the hosted"  # no sentence promising a finish
    assert response.stop_reason == "cut" and response.message.text == "Half of the hosted"
    assert response.usage.input_tokens > 0  # what the broken stream carried


async def test_a_stalled_hosted_stream_moves_to_the_fallback(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    hosted.script(fa.streamed("slow slow slow slow", pace=3.0, chunk=5))
    local.script(fo.reply(ANSWER))
    model = fallback(redis, hosted, local, closing, timeout=1.0)
    events, response = await collect(model.stream(request()))
    assert response.provider == "ollama" and text_of(events).endswith(ANSWER)


async def test_hosted_rejection_is_raised_not_hidden(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    hosted.script(fa.error(400, message="bad request"))
    with pytest.raises(ProviderRejected):
        await collect(fallback(redis, hosted, local, closing).stream(request()))
    assert local.count("/api/chat") == 0


async def test_both_streams_failing_raise_one_error_with_every_cause(
    redis: aioredis.Redis, hosted, local, closing
) -> None:
    hosted.script(fa.error(500))
    local.script(fo.failure(500))
    with pytest.raises(AllProvidersFailed) as caught:
        await collect(fallback(redis, hosted, local, closing).stream(request()))
    assert len(caught.value.causes) == 2
