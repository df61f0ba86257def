from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.llm.anthropic import AnthropicModel
from agent.llm.base import ProviderAuthError, ProviderRejected, ProviderUnavailable
from agent.llm.ollama import OllamaModel
from agent.llm.usage import estimate_cost
from agent.messages import (
    ChatRequest,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

CALC = ToolSpec(
    name="calculator",
    description="Evaluate arithmetic.",
    input_schema={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)


_open: list[AnthropicModel | OllamaModel] = []


@pytest.fixture(autouse=True)
async def close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().close()


def anthropic_model(fake: FakeAnthropic, timeout: float = 5.0) -> AnthropicModel:
    model = AnthropicModel(
        api_key="sk-ant-test", model="claude-test", base_url=fake.url, timeout=timeout
    )
    _open.append(model)
    return model


def ollama_model(fake: FakeOllama, model: str = "qwen2.5:7b") -> OllamaModel:
    made = OllamaModel(host=fake.url, model=model, num_ctx=8192)
    _open.append(made)
    return made


def conversation() -> ChatRequest:
    return ChatRequest(
        system="You are Parley.",
        messages=[
            Message.user("What is 6*7?"),
            Message(
                role="assistant",
                content=[
                    TextBlock(text="Let me compute."),
                    ToolUseBlock(id="toolu_1", name="calculator", input={"expression": "6*7"}),
                ],
            ),
            Message(
                role="user",
                content=[
                    ToolResultBlock(tool_use_id="toolu_1", content="42"),
                    TextBlock(text="and be brief"),
                ],
            ),
        ],
        tools=[CALC],
        max_tokens=512,
    )


async def test_anthropic_round_trips_tool_calls_and_caches_the_prefix(
    hosted: FakeAnthropic,
) -> None:
    hosted.script(
        fa.tool("calculator", thought="Checking.", expression="6*7"),
        fa.text("42.", usage={"cache_read_input_tokens": 900, "cache_creation_input_tokens": 0}),
    )
    model = anthropic_model(hosted)
    first = await model.complete(conversation())
    assert first.stop_reason == "tool_use"
    use = first.message.tool_uses[0]
    assert (use.name, use.input) == ("calculator", {"expression": "6*7"})
    assert first.message.text == "Checking."

    second = await model.complete(conversation())
    assert second.stop_reason == "end_turn" and second.message.text == "42."
    assert second.usage.cache_read_tokens == 900 and second.provider == "anthropic"

    sent = hosted.message_calls[0]
    assert sent.headers["Authorization"] == "Bearer sk-ant-test"
    body = sent.body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["max_tokens"] == 512
    assistant, user = body["messages"][1], body["messages"][2]
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "calculator",
        "input": {"expression": "6*7"},
        "cache_control": {"type": "ephemeral"},  # the last prior turn
    }
    assert user["content"][0]["type"] == "tool_result" and user["content"][0]["content"] == "42"
    assert user["content"][1] == {
        "type": "text",
        "text": "and be brief",
        "cache_control": {"type": "ephemeral"},  # the newest turn
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (429, ProviderUnavailable),
        (529, ProviderUnavailable),
        (500, ProviderUnavailable),
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (400, ProviderRejected),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_anthropic_errors_map_to_the_error_tree_without_retries(
    hosted: FakeAnthropic, status: int, expected: type[Exception], streamed: bool
) -> None:
    hosted.script(fa.error(status, retry_after=7))
    with pytest.raises(expected) as caught:
        await ask(anthropic_model(hosted), streamed)
    assert len(hosted.message_calls) == 1  # the SDK did not retry
    if status in (429, 529):
        assert isinstance(caught.value, ProviderUnavailable) and caught.value.retry_after == 7


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_anthropic_timeout_is_unavailable(hosted: FakeAnthropic, streamed: bool) -> None:
    hosted.script(fa.hang())
    with pytest.raises(ProviderUnavailable, match="timed out"):
        await ask(anthropic_model(hosted, timeout=0.3), streamed)


async def ask(model: AnthropicModel, streamed: bool) -> None:
    """One call, whole or streamed (the two go through different SDK methods)."""
    if not streamed:
        await model.complete(conversation())
        return
    async for _ in model.stream(conversation()):
        pass


async def test_ollama_round_trips_tool_calls_with_num_ctx(local: FakeOllama) -> None:
    local.script(fo.call("calculator", expression="6*7"), fo.reply("42."))
    model = ollama_model(local)
    first = await model.complete(conversation())
    assert first.stop_reason == "tool_use"
    assert first.message.tool_uses[0].input == {"expression": "6*7"}
    second = await model.complete(conversation())
    assert second.message.text == "42." and second.usage == Usage(input_tokens=30, output_tokens=9)

    body = local.calls("/api/chat")[0].body
    assert body["options"]["num_ctx"] == 8192
    assert body["messages"][0] == {"role": "system", "content": "You are Parley."}
    assert body["tools"][0]["function"]["name"] == "calculator"
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"expression": "6*7"}
    assert body["messages"][3] == {"role": "tool", "content": "42", "tool_name": "calculator"}


async def test_ollama_model_without_tools_names_the_model(local: FakeOllama) -> None:
    local.script(fo.failure(400, "registry.ollama.ai/library/gemma:2b does not support tools"))
    with pytest.raises(ProviderRejected, match="'qwen2.5:7b' does not support tools"):
        await ollama_model(local).complete(conversation())


async def test_ollama_missing_model_and_unreachable_server(local: FakeOllama) -> None:
    with pytest.raises(ProviderRejected, match="ollama pull llama9"):
        await ollama_model(local, "llama9").complete(conversation())
    await local.stop()
    with pytest.raises(ProviderUnavailable, match="not reachable"):
        await ollama_model(local).complete(conversation())


def test_cost_estimate_uses_the_price_table() -> None:
    prices = {"claude-test": (3.0, 15.0)}
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=1_000_000)
    assert estimate_cost(prices, "claude-test", usage) == pytest.approx(3.0 + 1.5 + 0.3)
    assert estimate_cost(prices, "unknown", usage) == 0.0
