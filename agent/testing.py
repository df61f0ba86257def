"""A scripted `ChatModel` for testing code that embeds the agent, without a real model.

It returns queued responses and records every request it gets::

    from agent import Agent, ScriptedModel, builtin_registry
    from agent.testing import call, reply, turn

    model = ScriptedModel([turn(call("calculator", expression="2+2")), reply("4")])
    outcome = await Agent(model, builtin_registry()).run("What is 2+2?", context)
    assert model.turn_requests[0].tools  # what the loop offered the model

A queued item may be a `ChatResponse`, an exception to raise, or a function of the request
(for answers that depend on what the loop sent). Requests for a running summary are answered
by `summarize` (on by default) without using up the script, so trimming tests stay readable.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from agent.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from agent.prompts import SUMMARY_SYSTEM_PROMPT

Scripted = ChatResponse | BaseException | Callable[[ChatRequest], ChatResponse]

_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The loop asked the model for more than the test scripted."""


def call(name: str, id: str | None = None, /, **args: Any) -> ToolUseBlock:
    """One tool_use block; ids are unique unless given."""
    return ToolUseBlock(id=id or f"toolu_{next(_ids):04d}", name=name, input=args)


def turn(*calls: ToolUseBlock, text: str = "", usage: Usage | None = None) -> ChatResponse:
    """An assistant turn that calls tools (optionally with some thinking text first)."""
    content: list[TextBlock | ToolUseBlock] = [TextBlock(text=text)] if text else []
    content.extend(calls)
    return ChatResponse(
        message=Message(role="assistant", content=list(content)),
        stop_reason="tool_use",
        usage=usage or Usage(input_tokens=10, output_tokens=5),
        provider="scripted",
        model="scripted-1",
    )


def reply(text: str, usage: Usage | None = None) -> ChatResponse:
    """A final answer."""
    return ChatResponse(
        message=Message.assistant(text),
        stop_reason="end_turn",
        usage=usage or Usage(input_tokens=10, output_tokens=5),
        provider="scripted",
        model="scripted-1",
    )


def is_summary_request(request: ChatRequest) -> bool:
    return request.system.startswith(SUMMARY_SYSTEM_PROMPT[:60])


class ScriptedModel:
    """A ChatModel that plays a script; `requests` holds every request, in order."""

    def __init__(
        self,
        script: Iterable[Scripted] = (),
        *,
        name: str = "scripted",
        summarize: bool = True,
        latency: float = 0.0,
    ) -> None:
        self.name = name
        self.script: deque[Scripted] = deque(script)
        self.requests: list[ChatRequest] = []
        self.summary_requests: list[ChatRequest] = []
        self.summarize = summarize
        self.latency = latency

    # The script helpers as attributes too: a host's test needs only `ScriptedModel` itself.
    call = staticmethod(call)
    turn = staticmethod(turn)
    reply = staticmethod(reply)

    def push(self, *items: Scripted) -> None:
        self.script.extend(items)

    @property
    def turn_requests(self) -> list[ChatRequest]:
        """The requests of THINK steps, without summary calls."""
        return [r for r in self.requests if not is_summary_request(r)]

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.summarize and is_summary_request(request):
            self.summary_requests.append(request)
            folded = request.messages[-1].text
            return reply(
                f"Summary #{len(self.summary_requests)} of {len(folded)} characters of talk.",
                Usage(input_tokens=len(folded) // 4, output_tokens=20),
            )
        if not self.script:
            raise ScriptExhausted(f"no scripted response left for request {len(self.requests)}")
        item = self.script.popleft()
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return item(request)
        return item
