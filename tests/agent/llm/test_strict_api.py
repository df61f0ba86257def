"""The fake Messages API in strict current-generation mode, driven by the real anthropic SDK:
each rule as Anthropic's documentation states it (the page named in each test), so the tests
of Parley against it prove something about the real API's contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.anthropic_strict import BINDING_BETA

MODEL = "claude-sonnet-5-5"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a place.",
    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
}


@pytest.fixture
async def client(hosted: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    made = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=hosted.url, max_retries=0)
    yield made
    await made.close()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def refused(call: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await call
    return str(caught.value)


async def test_thinking_is_always_on_and_cannot_be_disabled_or_budgeted(hosted, client) -> None:
    """ "What's new in Sonnet 5.5" (turn off up-front thinking with between_tools) and the
    migration guide (thinking budget and `thinking: disabled` return 400)."""
    hosted.responder = lambda body: fa.text("Hi")
    answer = await client.messages.create(model=MODEL, max_tokens=100, messages=[user("hi")])
    assert [b.type for b in answer.content] == ["thinking", "text"]  # adaptive by default
    message = await refused(
        client.messages.create(
            model=MODEL, max_tokens=100, messages=[user("hi")], thinking={"type": "disabled"}
        )
    )
    assert "between_tools" in message
    message = await refused(
        client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[user("hi")],
            thinking={"type": "enabled", "budget_tokens": 2048},
        )
    )
    assert "budget_tokens" in message
    between = await client.messages.create(
        model=MODEL, max_tokens=100, messages=[user("hi")], thinking={"type": "between_tools"}
    )
    assert between.content[-1].type == "text"


@pytest.mark.parametrize("setting", [{"temperature": 0.2}, {"top_p": 0.9}, {"top_k": 5}])
async def test_sampling_settings_are_refused(hosted, client, setting) -> None:
    """The Sonnet 5.5 migration guide: sampling parameters return 400 (this SDK no longer
    has arguments for them; an older caller sends them in the body)."""
    message = await refused(
        client.messages.create(
            model=MODEL, max_tokens=100, messages=[user("hi")], extra_body=setting
        )
    )
    assert next(iter(setting)) in message


async def test_prefill_and_forced_tool_choice_are_refused(hosted, client) -> None:
    """The migration guide (assistant prefill) and "What's new in Sonnet 5.5" (forced tool
    use returns an error)."""
    prefill = [user("hi"), {"role": "assistant", "content": "Sure, "}]
    assert "prefill" in await refused(
        client.messages.create(model=MODEL, max_tokens=100, messages=prefill)
    )
    for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
        assert "Forced tool use" in await refused(
            client.messages.create(
                model=MODEL,
                max_tokens=100,
                messages=[user("hi")],
                tools=[WEATHER],
                tool_choice=choice,  # type: ignore[arg-type]
            )
        )
    hosted.responder = lambda body: fa.text("fine")
    await client.messages.create(
        model=MODEL, max_tokens=100, messages=[user("hi")], tool_choice={"type": "auto"}
    )


async def test_text_between_tool_calls_comes_back_as_thinking_shown_or_omitted(
    hosted, client
) -> None:
    """ "What's new in Sonnet 5.5": text between tool calls comes back in thinking blocks,
    with their text when `display` returns it (`summarized`), empty when `omitted`."""
    for display, expected in (("summarized", "Looking it up."), ("omitted", "")):
        hosted.script(fa.tool("get_weather", thought="Looking it up.", location="Paris"))
        answer = await client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[user("weather in Paris?")],
            tools=[WEATHER],
            thinking={"type": "adaptive", "display": display},  # type: ignore[typeddict-item]
        )
        assert [b.type for b in answer.content] == ["thinking", "tool_use"]
        thinking = answer.content[0]
        assert thinking.type == "thinking" and thinking.thinking == expected
        assert thinking.signature


async def turn_with_tool(client: anthropic.AsyncAnthropic, hosted: FakeAnthropic) -> list[Any]:
    hosted.script(fa.tool("get_weather", thought="Looking it up.", location="Paris"))
    first = [user("weather in Paris?")]
    answer = await client.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=first,  # type: ignore[arg-type]
        tools=[WEATHER],
        thinking={"type": "adaptive", "display": "summarized"},  # type: ignore[typeddict-item]
    )
    blocks = [b.model_dump(exclude_none=True) for b in answer.content]
    result = {
        "type": "tool_result",
        "tool_use_id": blocks[-1]["id"],
        "content": "sunny, 21 °C",
    }
    return [*first, {"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]


async def test_a_tool_turn_sent_back_without_its_thinking_is_refused(hosted, client) -> None:
    """ "Handling stop reasons" and the extended-thinking rules: the final assistant turn
    of a tool loop must start with a thinking block."""
    history = await turn_with_tool(client, hosted)
    hosted.responder = lambda body: fa.text("Sunny.")
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 100, "tools": [WEATHER]}
    await client.messages.create(messages=history, **kwargs)  # as it came: accepted
    stripped = [*history]
    stripped[1] = {"role": "assistant", "content": history[1]["content"][1:]}
    message = await refused(client.messages.create(messages=stripped, **kwargs))
    assert "a final `assistant` message must start with a thinking block" in message


async def test_signatures_must_come_back_unchanged(hosted, client) -> None:
    """ "Preserved thinking": send assistant turns back exactly as the API returned them."""
    history = await turn_with_tool(client, hosted)
    altered = [*history]
    thinking = {**history[1]["content"][0], "thinking": "Something else entirely."}
    altered[1] = {"role": "assistant", "content": [thinking, *history[1]["content"][1:]]}
    message = await refused(
        client.messages.create(model=MODEL, max_tokens=100, tools=[WEATHER], messages=altered)
    )
    assert "Invalid `signature`" in message


async def test_a_changed_prefix_is_refused_unless_mismatched_blocks_may_be_dropped(
    hosted, client
) -> None:
    """ "Preserved thinking" and "Prefix checks on thinking blocks": a block is bound to the
    system prompt, tools and messages before it; a change there is a 400 unless the request
    sets `prefix_mismatch_behavior: drop_block` (with the beta header), which drops it."""
    history = await turn_with_tool(client, hosted)
    hosted.responder = lambda body: fa.text("Sunny.")
    changed = [user("weather in Paris, please?"), *history[1:]]
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 100, "tools": [WEATHER]}
    message = await refused(client.messages.create(messages=changed, **kwargs))
    assert "bound to a different conversation" in message and "drop_block" in message
    assert "bound to a different conversation" in await refused(
        client.messages.create(messages=history, system="A new system prompt.", **kwargs)
    )
    answer = await client.messages.create(
        messages=changed,
        extra_headers={"anthropic-beta": BINDING_BETA},
        thinking={  # type: ignore[typeddict-unknown-key]
            "type": "adaptive",
            "block_binding": {"prefix_mismatch_behavior": "drop_block"},
        },
        **kwargs,
    )
    assert answer.content[-1].type == "text"
    assert hosted.strict.dropped[-1]["path"] == "messages.1.content.0"


async def test_the_4x_models_keep_their_contract(hosted, client) -> None:
    """A request naming a 4.x model is answered as before: no thinking unless asked."""
    hosted.responder = lambda body: fa.text("Hi")
    answer = await client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[user("hi")],
        extra_body={"temperature": 0.2},
    )
    assert [b.type for b in answer.content] == ["text"]


async def test_a_streamed_answer_carries_thinking_and_signature_deltas(hosted, client) -> None:
    """ "What's new in Sonnet 5.5": thinking streams as `thinking_delta` and
    `signature_delta`."""
    hosted.script(fa.streamed("Sunny and warm.", chunk=4))
    kinds: list[str] = []
    async with client.messages.stream(
        model=MODEL,
        max_tokens=100,
        messages=[user("weather?")],
        thinking={"type": "adaptive", "display": "summarized"},  # type: ignore[typeddict-item]
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                kinds.append(event.delta.type)
        final = await stream.get_final_message()
    assert "thinking_delta" in kinds and "signature_delta" in kinds and "text_delta" in kinds
    assert kinds.index("signature_delta") < kinds.index("text_delta")
    assert [b.type for b in final.content] == ["thinking", "text"]
