"""Local models that think (qwen3, gpt-oss, deepseek-r1) through Ollama: `think` is a
setting, `message.thinking` stays off the answer and feeds the status line."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.builtin_tools import builtin_registry
from agent.llm.ollama import OllamaModel
from agent.llm.streaming import TextDelta, ThinkingDelta
from agent.loop import Agent
from agent.messages import ChatRequest, ChatResponse, Message
from agent.outcomes import Finished
from agent.protocols import ProgressEvent, RunContext
from bot.wiring.models import ollama_think
from tests.fakes import ollama as fo
from tests.fakes.ollama import FakeOllama

CONTEXT = RunContext(conversation_id="c", platform="console", user_id="u", chat_id="c")


@pytest.fixture
async def local() -> AsyncIterator[FakeOllama]:
    """Ollama with a model that thinks (the slow tier knows this fixture by its name)."""
    async with FakeOllama(models=["qwen3:8b"]) as fake:
        yield fake


def ollama(fake: FakeOllama, think: bool | str | None = None) -> OllamaModel:
    return OllamaModel(host=fake.url, model="qwen3:8b", num_ctx=4096, think=think)


async def test_thinking_streams_apart_from_the_answer(local) -> None:
    local.script(fo.thought("The user greets me; greet back.", fo.reply("Hello there!")))
    model = ollama(local, think=True)
    try:
        events = [
            e async for e in model.stream(ChatRequest(system="", messages=[Message.user("hi")]))
        ]
    finally:
        await model.close()
    notes = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert notes == "The user greets me; greet back." and text == "Hello there!"
    response = events[-1]
    assert isinstance(response, ChatResponse) and response.message.text == "Hello there!"
    assert local.calls("/api/chat")[-1].body["think"] is True


async def test_think_off_and_levels_are_sent_and_unset_is_not(local) -> None:
    for setting, sent in (("false", False), ("high", "high"), (None, None)):
        local.script(fo.thought("hmm", fo.reply("ok")))
        model = ollama(local, think=ollama_think(setting))
        try:
            answer = await model.complete(ChatRequest(system="", messages=[Message.user("hi")]))
        finally:
            await model.close()
        assert answer.message.text == "ok"
        body = local.calls("/api/chat")[-1].body
        assert body.get("think", None) == sent


async def test_a_thinking_local_model_s_note_is_the_status_before_its_tool_call(local) -> None:
    events: list[ProgressEvent] = []

    async def watch(event: ProgressEvent) -> None:
        events.append(event)

    local.script(
        fo.thought("I should compute this.", fo.call("calculator", expression="6*7")),
        fo.thought("It is 42.", fo.reply("6 × 7 = 42.")),
    )
    model = ollama(local, think=True)
    try:
        outcome = await Agent(model, builtin_registry(), on_progress=watch).run("6*7?", CONTEXT)
    finally:
        await model.close()
    assert isinstance(outcome, Finished) and outcome.answer == "6 × 7 = 42."
    shown = "".join(e.detail.get("text", "") for e in events if e.kind == "text_delta")
    assert "compute" not in shown and "It is 42." not in shown
    statuses = [e.detail.get("status") for e in events if e.kind == "text_reset"]
    assert "I should compute this." in statuses
    assert all("thinking" not in str(m.content) for m in outcome.state.messages)
