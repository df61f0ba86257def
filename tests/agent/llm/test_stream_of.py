"""Which models stream is declared (subclassing `StreamingModel`), not found by probing."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from agent.llm.anthropic import AnthropicModel
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.llm.streaming import StreamEvent, StreamingModel, TextDelta, stream_of
from agent.llm.usage import MeteredModel
from agent.messages import ChatRequest, ChatResponse, Message
from agent.testing import ScriptedModel, reply


def request() -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user("hello")])


class Writer(StreamingModel):
    name = "writer"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("a streaming model is streamed, not asked for the whole answer")

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        yield TextDelta("Hel")
        yield TextDelta("lo")
        yield reply("Hello")


class Speaker:
    """A model with a method named `stream` that never declared streaming."""

    name = "speaker"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return reply("whole")

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        raise AssertionError("not a StreamingModel: only complete() is called")
        yield  # pragma: no cover


async def events(model: object) -> list[object]:
    return [event async for event in stream_of(model, request())]  # type: ignore[arg-type]


async def test_a_streaming_model_streams_and_a_plain_one_answers_once() -> None:
    streamed = await events(Writer())
    assert streamed[:2] == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(streamed[-1], ChatResponse) and streamed[-1].message.text == "Hello"

    (whole,) = await events(ScriptedModel([reply("once")]))
    assert isinstance(whole, ChatResponse) and whole.message.text == "once"


async def test_a_stream_method_alone_does_not_make_a_model_stream() -> None:
    # Declared, not probed: a look-alike `stream` is not called.
    (whole,) = await events(Speaker())
    assert isinstance(whole, ChatResponse) and whole.message.text == "whole"


def test_every_provider_declares_that_it_streams() -> None:
    for model in (AnthropicModel, OllamaModel, FallbackModel, MeteredModel):
        assert issubclass(model, StreamingModel), model
    assert not isinstance(ScriptedModel(), StreamingModel)
