"""One THINK step, streamed when someone is watching.

Text deltas of the model's turn go out as `text_delta` progress events. The loop only knows at
the end of a turn whether its text was the answer; the model says so earlier by starting a
tool call, and then a `text_reset` event (with the text so far, shortened, as a `status`)
turns what was shown into a status line. A provider switch midway is a `text_reset` too.
A thinking model's notes (its thinking, where the provider returns its text) are never the
answer: the note before a tool call is that call's status line, as text before it would be.
"""

from __future__ import annotations

import contextlib
import logging

from agent.llm.base import ChatModel, LLMError, cut_usage
from agent.llm.streaming import StreamReset, TextDelta, ThinkingDelta, ToolUseStarted, stream_of
from agent.messages import ChatRequest, ChatResponse, Message
from agent.protocols import ProgressEvent
from agent.turns import Actor

log = logging.getLogger(__name__)

STATUS_CHARS = 80


async def think(
    model: ChatModel,
    request: ChatRequest,
    actor: Actor,
    *,
    step: int,
    stream: bool = True,
    shown: bool = False,
) -> ChatResponse:
    """One model turn. A model error once answer text was shown (in this step, or in earlier
    pieces of the same answer: `shown`) is not raised: the turn comes back cut (stop reason
    "cut", the text this step wrote, the usage the broken stream carried)."""
    written: list[str] = []
    notes: list[str] = []  # the model's thinking this turn: a status line, never the answer
    try:
        if actor.on_progress is None or not stream:
            return await model.complete(request)
        async with contextlib.aclosing(stream_of(model, request)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    written.append(event.text)
                    detail = {"text": event.text}
                    await actor.notify(ProgressEvent(kind="text_delta", step=step, detail=detail))
                elif isinstance(event, ThinkingDelta):
                    notes.append(event.text)
                elif isinstance(event, ToolUseStarted):
                    said = written if "".join(written).strip() else notes
                    detail = {"status": status(said)} if "".join(said).strip() else {}
                    written.clear()
                    notes.clear()
                    await actor.notify(ProgressEvent(kind="text_reset", step=step, detail=detail))
                elif isinstance(event, StreamReset):
                    written.clear()
                    notes.clear()
                    await actor.notify(ProgressEvent(kind="text_reset", step=step))
                else:
                    return event
    except LLMError as exc:
        text = "".join(written)
        if not (text.strip() or shown):
            raise
        log.warning("a model stream broke after its text was shown (%s)", type(exc).__name__)
        message = Message.assistant(text) if text else Message(role="assistant", content=[])
        return ChatResponse(message=message, stop_reason="cut", usage=cut_usage(exc))
    raise AssertionError("a model stream ended without its response")


def status(written: list[str]) -> str:
    """The model's thinking before a tool call as one short line."""
    line = " ".join("".join(written).split())
    return line if len(line) <= STATUS_CHARS else line[: STATUS_CHARS - 1].rstrip() + "…"
