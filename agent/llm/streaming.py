"""Streaming beside `ChatModel.complete`: a model that can also hand out its answer as it is written.

A stream yields events and always ends with the whole `ChatResponse`::

    TextDelta("Hel") … TextDelta("lo")  ToolUseStarted("calculator")  ChatResponse(...)

A thinking model's notes come as `ThinkingDelta`s, apart from the answer's text.

`StreamReset` says that everything streamed so far is void: the fallback moved to another
provider midway and will stream the answer again from the start. Callers that only want the
response use `complete`; summaries and extraction keep doing so.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from agent.llm.base import ChatModel
from agent.messages import ChatRequest, ChatResponse


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolUseStarted:
    """The model began a tool call: any text of this turn so far was thinking, not the answer."""

    name: str


@dataclass(frozen=True)
class ThinkingDelta:
    """Part of the model's thinking (its progress notes): for a status line, never the answer."""

    text: str


@dataclass(frozen=True)
class StreamReset:
    reason: str


# The user turn that asks a model to go on with an answer that was cut short (by the output
# limit, or by a stream that broke), after that answer as the assistant's turn.
CONTINUE_PROMPT = (
    "Your answer above was cut off. Continue it from exactly where it stops, without "
    "repeating anything or commenting on the interruption."
)

StreamEvent = TextDelta | ThinkingDelta | ToolUseStarted | StreamReset | ChatResponse


class StreamingModel(ABC):
    """A `ChatModel` that can also hand out its answer as it is written; a model declares it
    by subclassing. A plain class, not a runtime-checkable Protocol: `stream_of` asks with
    isinstance on every call, which costs a Protocol about 6 µs and this class nanoseconds."""

    @abstractmethod
    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """Events as the answer is written, ending with the whole `ChatResponse`."""


async def stream_of(model: ChatModel, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
    """The model's stream, or its one complete answer as a stream of one."""
    if isinstance(model, StreamingModel):
        async with contextlib.aclosing(model.stream(request)) as events:
            async for event in events:
                yield event
        return
    yield await model.complete(request)
