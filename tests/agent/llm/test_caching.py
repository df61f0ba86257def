"""Prompt caching: the fake's usage accounting follows the API, and a long thread hits it."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator

import pytest

from agent.builtin_tools import builtin_registry
from agent.llm.anthropic import AnthropicModel, sdk_errors
from agent.llm.base import ProviderRejected
from agent.loop import Agent
from agent.messages import ChatRequest, Message
from agent.protocols import MemoryRecord, RunContext
from agent.state import RunState
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic, PromptCache

CONTEXT = RunContext(conversation_id="c", platform="console", user_id="u", chat_id="c")


@pytest.fixture
async def model(hosted: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    made = AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url)
    yield made
    await made.close()


def body(*texts: str, marks: tuple[int, ...] = ()) -> dict:
    """A request whose messages are `texts`, with breakpoints on the given message indexes."""
    messages = []
    for index, text in enumerate(texts):
        block: dict = {"type": "text", "text": text}
        if index in marks:
            block["cache_control"] = {"type": "ephemeral"}
        messages.append({"role": "user" if index % 2 == 0 else "assistant", "content": [block]})
    return {"model": "claude-test", "messages": messages}


def test_the_fake_caches_prefixes_at_breakpoints_and_bills_only_the_rest() -> None:
    cache = PromptCache(min_tokens=1024)
    turns = ["a" * 4000, "b" * 4000, "c" * 400]
    first = cache.usage(body(*turns, marks=(1,)))
    assert first["cache_read_input_tokens"] == 0
    written = first["cache_creation_input_tokens"]
    assert 2000 <= written <= 2020  # the two turns up to the breakpoint
    assert first["input_tokens"] == pytest.approx(100, abs=10)  # only what follows it
    again = cache.usage(body(*turns, "d" * 4000, "e" * 400, marks=(3,)))
    assert again["cache_read_input_tokens"] == written  # found two blocks before the mark
    assert again["cache_creation_input_tokens"] == pytest.approx(1100, abs=20)
    assert again["input_tokens"] == pytest.approx(100, abs=10)


def test_the_fake_honours_the_minimum_length_the_lookback_and_the_exact_prefix() -> None:
    cache = PromptCache(min_tokens=1024)
    short = cache.usage(body("a" * 2000, "b" * 100, marks=(1,)))
    assert short["cache_creation_input_tokens"] == 0  # under 1024 tokens: not cached
    cache.usage(body("x" * 5000, marks=(0,)))
    far = ["x" * 5000, *(["y" * 40] * 21)]
    missed = cache.usage(body(*far, marks=(21,)))
    assert missed["cache_read_input_tokens"] == 0  # the cached prefix is 21 blocks back
    changed = cache.usage(body("x" * 4999 + "z", "y" * 40, marks=(1,)))
    assert changed["cache_read_input_tokens"] == 0  # one character differs: no hit
    assert cache.usage(body("a" * 100))["cache_creation_input_tokens"] == 0  # no breakpoint


async def test_more_than_four_breakpoints_is_a_bad_request(hosted: FakeAnthropic) -> None:
    hosted.responder = lambda body: fa.text("ok")
    cached = [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}] * 5
    with pytest.raises(ProviderRejected, match="maximum of 4 blocks"):
        await hosted_call(hosted, system=cached)


async def hosted_call(hosted: FakeAnthropic, **wire: object) -> None:
    """Send a hand-made wire request through the SDK, errors mapped as the provider does."""
    model = AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url)
    request = model.wire_request(ChatRequest(system="", messages=[Message.user("hi")]))
    try:
        with sdk_errors():
            await model.client.messages.create(**{**request, **wire})
    finally:
        await model.close()


class ChangingRecall:
    """Recalls memories that depend on the query, as a vector index would."""

    async def recall(
        self, query: str, context: RunContext, k: int | None = None
    ) -> list[MemoryRecord]:
        rng = random.Random(query)
        now = time.time()
        return [
            MemoryRecord(
                id=f"m{n}",
                text=f"fact {rng.randrange(10_000)} about the user's projects",
                kind="fact",
                scope=context.user_scope,
                author=context.user_id,
                source_conversation="c",
                created_at=now,
                last_used_at=now,
            )
            for n in range(k or 5)
        ]


def question(rng: random.Random, turn: int) -> str:
    words = " ".join(rng.choice(["budget", "deploy", "review", "plan", "ship"]) for _ in range(40))
    return f"Question {turn}: {words}?"


async def test_a_long_thread_reads_most_of_each_prompt_from_the_cache(
    hosted: FakeAnthropic, model: AnthropicModel
) -> None:
    rng = random.Random(7)
    hosted.responder = lambda body: fa.text("Answer: " + "details " * 95)
    agent = Agent(model, builtin_registry(), recall=ChangingRecall())
    state: RunState | None = None
    shares = []
    for turn in range(1, 51):
        outcome = await agent.run(question(rng, turn), CONTEXT, history=state)
        state = outcome.state
        usage = outcome.trace.usage
        prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        shares.append(usage.cache_read_tokens / prompt)
    # ~70-token questions, ~200-token answers: about 15k tokens of prompt by turn 50
    assert prompt > 14_000
    assert min(shares[2:]) >= 0.8, [round(s, 2) for s in shares]
    last = hosted.message_calls[-1].body
    assert last["system"] == [
        {
            "type": "text",
            "text": agent.system_prompt.rstrip(),
            "cache_control": {"type": "ephemeral"},
        }
    ]
    context = last["messages"][-1]["content"][-1]["text"]
    assert context.startswith("<context>") and "<remembered>" in context
    assert "cache_control" not in last["messages"][-1]["content"][-1]
    assert "Question 50" in last["messages"][-1]["content"][-2]["text"]  # said once, before
