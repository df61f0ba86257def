"""Recorded model streams cut at every event, every way a stream can end early.

Each cut must end as one of: complete (with the stream's real stop reason), unavailable
before anything was shown (the fallback answers from the start), or cut after text was shown
(`StreamCut` with exactly the text shown; through the fallback: that text kept, then the
local model's continuation after one sentence). Never another error, never a cut answer
presented as complete.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from agent.llm.anthropic import AnthropicModel
from agent.llm.base import LLMError, ProviderUnavailable, StreamCut
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import redis_breaker
from agent.llm.fallback import FINISHED_BY_FALLBACK, FallbackModel
from agent.llm.ollama import OllamaModel
from agent.llm.streaming import StreamEvent, StreamReset, TextDelta, ToolUseStarted
from agent.llm.usage import MeteredModel
from agent.messages import ChatRequest, ChatResponse, Message, ThinkingBlock
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.cuts import HOWS, Cut, lines, stream

ANTHROPIC = {
    "anthropic_text": ("Hello!", "end_turn", 25),
    "anthropic_tool_use": ("Okay, let's check the weather for San Francisco, CA:", "tool_use", 472),
    "anthropic_thinking": (
        "The greatest common divisor (GCD) of 1071 and 462 is **21**.",
        "end_turn",
        0,
    ),
    # the current generation (Sonnet 5.5): thinking shown, omitted, and between tool calls
    "anthropic_55_thinking_shown": (
        "The greatest common divisor of 1071 and 462 is **21**.",
        "end_turn",
        41,
    ),
    "anthropic_55_thinking_omitted": (
        "The greatest common divisor of 1071 and 462 is **21**.",
        "end_turn",
        41,
    ),
    "anthropic_55_tools_between": ("", "tool_use", 518),
}
# signed thinking blocks each whole stream carries
THINKING_BLOCKS = {
    "anthropic_55_thinking_shown": 1,
    "anthropic_55_thinking_omitted": 1,
    "anthropic_55_tools_between": 2,
}
OLLAMA = {"ollama_text": ("The sky is blue.", "end_turn"), "ollama_tool_call": ("", "tool_use")}
LOCAL = "Local answer."


def request() -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user("hi")])


def cuts(events: int) -> list[Cut]:
    """Every cut point for the quick ways; a stall (which costs a timeout) at a few."""
    found = [Cut(at, how) for at in range(events + 1) for how in HOWS if how != "stall"]
    return found + [Cut(at, "stall") for at in sorted({1, events // 2, events - 1})]


def sweep(recorded: dict[str, int]) -> list[tuple[str, Cut]]:
    return [(name, cut) for name, count in recorded.items() for cut in cuts(count)]


ANTHROPIC_CUTS = sweep({name: len(stream(name)) for name in ANTHROPIC})
# through the fallback a clean early end or a torn event behaves as a drop does (the
# provider sweep shows it); every cut point is still swept
FALLBACK_CUTS = [(name, cut) for name, cut in ANTHROPIC_CUTS if cut.how not in ("end", "torn")]
OLLAMA_CUTS = sweep({name: len(lines(name)) for name in OLLAMA})


def ident(value: object) -> str:
    return f"{value.at}-{value.how}" if isinstance(value, Cut) else str(value)


@pytest.fixture
async def models(hosted, local) -> AsyncIterator[tuple[AnthropicModel, OllamaModel]]:
    anthropic = AnthropicModel(
        api_key="sk-ant-test", model="claude-test", base_url=hosted.url, timeout=0.5
    )
    ollama = OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096, timeout=0.5)
    yield anthropic, ollama
    await anthropic.close()
    await ollama.close()


async def run(events: AsyncIterator[StreamEvent]) -> tuple[list[StreamEvent], object]:
    """The events a stream yielded, and how it ended: its response or its error."""
    seen: list[StreamEvent] = []
    try:
        async for event in events:
            seen.append(event)
    except LLMError as exc:
        return seen, exc
    return seen[:-1], seen[-1]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize(("name", "cut"), ANTHROPIC_CUTS, ids=ident)
async def test_an_anthropic_stream_cut_anywhere_ends_complete_or_cut(
    hosted, models, name: str, cut: Cut
) -> None:
    whole, reason, input_tokens = ANTHROPIC[name]
    hosted.script(fa.recorded(stream(name), cut=cut))
    events, end = await run(models[0].stream(request()))
    complete = cut.at == len(stream(name))  # every event, message_stop included, went out
    if isinstance(end, ChatResponse):
        assert complete, "a stream missing its message_stop was presented as complete"
        assert end.stop_reason == reason and end.message.text == whole
        assert text_of(events) == whole
        thinking = [b for b in end.message.thinking if isinstance(b, ThinkingBlock)]
        assert len(thinking) == THINKING_BLOCKS.get(name, len(thinking))
        assert all(b.signature for b in thinking) or name == "anthropic_thinking"
        return
    assert isinstance(end, ProviderUnavailable), end  # no raw error, no "rejected"
    if text_of(events) or cut.at > 0:
        assert isinstance(end, StreamCut)
        assert end.partial.message.text == text_of(events)  # exactly what was shown
        assert not end.partial.message.thinking  # thinking is never part of a cut answer
        assert end.partial.stop_reason == "cut"
        if cut.at >= 1:  # message_start went out: its usage counts (none in the thinking one)
            assert end.partial.usage.input_tokens == input_tokens


@pytest.mark.parametrize(("name", "cut"), OLLAMA_CUTS, ids=ident)
async def test_an_ollama_stream_cut_anywhere_ends_complete_or_cut(
    local, models, name: str, cut: Cut
) -> None:
    whole, reason = OLLAMA[name]
    local.script(fo.recorded(lines(name), cut=cut))
    events, end = await run(models[1].stream(request()))
    complete = cut.at == len(lines(name))
    if isinstance(end, ChatResponse):
        assert complete, "a stream missing its done line was presented as complete"
        assert end.stop_reason == reason and end.message.text == whole
        if reason == "tool_use":
            assert ToolUseStarted("get_temperature") in events
        return
    assert isinstance(end, ProviderUnavailable), end  # an error line is not "rejected"
    if cut.at > 0:
        assert isinstance(end, StreamCut) and end.partial.message.text == text_of(events)


@pytest.mark.parametrize(("name", "cut"), FALLBACK_CUTS, ids=ident)
async def test_through_the_fallback_a_cut_answer_is_kept_or_answered_afresh(
    redis: aioredis.Redis, hosted, local, models, name: str, cut: Cut
) -> None:
    whole, reason, _ = ANTHROPIC[name]
    hosted.script(fa.recorded(stream(name), cut=cut))
    local.responder = lambda body: fo.reply(LOCAL)
    breaker = redis_breaker(redis, "parley:breaker:anthropic", "anthropic", BreakerPolicy())
    model = FallbackModel(models[0], models[1], breaker, timeout=2.0)
    events, end = await run(model.stream(request()))
    assert isinstance(end, ChatResponse), end
    if end.provider == "anthropic":
        assert cut.at == len(stream(name)) and end.stop_reason == reason
        assert end.message.text == whole
        return
    assert await redis.hget("parley:breaker:anthropic", "failures") == b"1"  # counted once
    resets = [i for i, e in enumerate(events) if isinstance(e, StreamReset)]
    shown = text_of(events[: resets[-1]] if resets else events).split(FINISHED_BY_FALLBACK)[0]
    if FINISHED_BY_FALLBACK in text_of(events):  # text was shown: kept, then finished
        assert not resets and shown and whole.startswith(shown)
        assert end.message.text == shown + FINISHED_BY_FALLBACK + LOCAL
        body = local.calls("/api/chat")[-1].body
        assert body["messages"][-2] == {"role": "assistant", "content": shown}
    else:  # nothing of the answer shown: the local model answers from the start
        after = events[resets[-1] + 1 :] if resets else events
        assert end.message.text == LOCAL and text_of(after) == LOCAL


@pytest.mark.parametrize("how", ["end", "drop", "stall"])
async def test_a_whole_answer_cut_midway_is_unavailable_and_the_fallback_answers(
    redis: aioredis.Redis, hosted, local, models, how: str
) -> None:
    """`complete` too: half a JSON body is a provider that broke, never a raw error."""
    item = fa.Item("text", [{"type": "text", "text": "Hello"}], cut=Cut(at=0, how=how))  # type: ignore[arg-type]
    hosted.script(item)
    with pytest.raises(ProviderUnavailable):
        await models[0].complete(request())
    hosted.script(item)
    local.script(fo.reply(LOCAL))
    breaker = redis_breaker(redis, "parley:breaker:anthropic", "anthropic", BreakerPolicy())
    response = await FallbackModel(models[0], models[1], breaker, timeout=2.0).complete(request())
    assert response.provider == "ollama" and response.message.text == LOCAL
    assert await redis.hget("parley:breaker:anthropic", "failures") == b"1"


@pytest.mark.parametrize(
    "reason",
    ["refusal", "pause_turn", "model_context_window_exceeded", "max_tokens", "stop_sequence"],
)
async def test_whole_answers_carry_their_real_stop_reason(hosted, models, reason: str) -> None:
    hosted.script(fa.Item("text", [{"type": "text", "text": "x"}], stop_reason=reason))
    assert (await models[0].complete(request())).stop_reason == reason
    hosted.script(fa.Item("text", [{"type": "text", "text": "x"}], stop_reason=reason))
    _, end = await run(models[0].stream(request()))
    assert isinstance(end, ChatResponse) and end.stop_reason == reason


async def test_an_unknown_stop_reason_is_other_and_logged_once(hosted, models, caplog) -> None:
    for _ in range(3):
        hosted.script(fa.Item("text", [{"type": "text", "text": "x"}], stop_reason="brand_new"))
        assert (await models[0].complete(request())).stop_reason == "other"
    assert sum("brand_new" in r.getMessage() for r in caplog.records) == 1


async def test_a_cut_stream_s_usage_is_metered(hosted, models) -> None:
    """What a broken stream carried was spent: its tokens count, its call is "StreamCut"."""

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    tokens = sample("parley_model_tokens_total", provider="anthropic", kind="input")
    cuts = sample("parley_model_calls_total", provider="anthropic", result="StreamCut")
    hosted.script(fa.recorded(stream("anthropic_text"), cut=Cut(at=4, how="drop")))
    _, end = await run(MeteredModel(models[0], {}).stream(request()))
    assert isinstance(end, StreamCut) and end.partial.usage.input_tokens == 25
    assert sample("parley_model_tokens_total", provider="anthropic", kind="input") == tokens + 25
    assert sample("parley_model_calls_total", provider="anthropic", result="StreamCut") == cuts + 1


@pytest.mark.parametrize("how", ["end", "drop", "torn", "stall"])
async def test_a_whole_ollama_answer_cut_midway_is_unavailable(local, models, how: str) -> None:
    local.script(fo.ChatItem(content="The sky is blue.", cut=Cut(at=0, how=how)))  # type: ignore[arg-type]
    with pytest.raises(ProviderUnavailable):
        await models[1].complete(request())


@pytest.mark.parametrize(
    ("done_reason", "expected"), [("stop", "end_turn"), ("length", "max_tokens"), ("", "end_turn")]
)
async def test_ollama_answers_carry_their_real_stop_reason(
    local, models, done_reason: str, expected: str
) -> None:
    for streamed in (False, True):
        local.script(fo.ChatItem(content="x", done_reason=done_reason))
        if streamed:
            _, end = await run(models[1].stream(request()))
        else:
            end = await models[1].complete(request())
        assert isinstance(end, ChatResponse) and end.stop_reason == expected


async def test_an_unknown_ollama_done_reason_is_other_and_logged_once(
    local, models, caplog
) -> None:
    for _ in range(3):
        local.script(fo.ChatItem(content="x", done_reason="unloaded_midway"))
        assert (await models[1].complete(request())).stop_reason == "other"
    assert sum("unloaded_midway" in r.getMessage() for r in caplog.records) == 1
