"""Anthropic's stream events assembled into one response, and what a broken stream carried.

A stream is complete only with its `message_stop`; whatever ends it earlier (a dropped
connection, a stall, an error event, a body that simply stops) leaves a `partial` answer:
the text so far and the usage the events carried, missing figures counted as zero.
A tool call the output limit cut midway (`max_tokens` before its `content_block_stop`) is
left out of the response, which says so (`cut_tool_call`), so the loop can retry it.

Thinking blocks (a current-generation model's) are kept whole, signature included
(`thinking_delta`, `signature_delta`); their text is handed out as `ThinkingDelta`, never as
the answer. A cut stream's partial answer keeps only its text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from agent.llm.base import ProviderRejected
from agent.llm.streaming import StreamEvent, TextDelta, ThinkingDelta, ToolUseStarted
from agent.messages import (
    ChatResponse,
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)

log = logging.getLogger(__name__)

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "model_context_window_exceeded",
}
_unknown_seen: set[str] = set()


def stop_reason(raw: str | None, provider: str = "anthropic") -> StopReason:
    """The API's stop reason as ours; one we don't know is logged once per process."""
    known = STOP_REASONS.get(raw or "")
    if known is not None:
        return known
    if raw not in _unknown_seen:
        _unknown_seen.add(str(raw))
        log.warning("%s ended a turn with an unknown stop reason %r", provider, raw)
    return "other"


def usage_of(usage: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
    )


def thinking_of(block: dict[str, Any]) -> ThinkingBlock | RedactedThinkingBlock | None:
    """A thinking or redacted_thinking block of the API's JSON, exactly as it came."""
    if block.get("type") == "thinking":
        return ThinkingBlock(
            thinking=block.get("thinking") or "", signature=block.get("signature") or ""
        )
    if block.get("type") == "redacted_thinking":
        return RedactedThinkingBlock(data=block.get("data") or "")
    return None


class Assembly:
    """One streamed message, event by event (the API's JSON events)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.raw_stop: str | None = None
        self.open: set[int] = set()  # blocks started and not stopped
        self.stopped = False  # message_stop arrived
        self.started = False  # any event arrived

    def feed(self, event: dict[str, Any]) -> Iterator[StreamEvent]:
        self.started = True
        kind = event.get("type")
        if kind == "content_block_delta":
            index, delta = event["index"], event.get("delta") or {}
            if delta.get("type") == "text_delta":
                block = self.blocks.setdefault(index, {"type": "text", "text": ""})
                block["text"] = block.get("text", "") + delta["text"]
                yield TextDelta(delta["text"])
            elif delta.get("type") == "thinking_delta":
                block = self.blocks.setdefault(index, {"type": "thinking", "thinking": ""})
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
                if delta.get("thinking"):
                    yield ThinkingDelta(delta["thinking"])
            elif delta.get("type") == "signature_delta":
                block = self.blocks.setdefault(index, {"type": "thinking", "thinking": ""})
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif delta.get("type") == "input_json_delta":
                self.json_parts.setdefault(index, []).append(delta.get("partial_json", ""))
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self.blocks[event["index"]] = block
            self.open.add(event["index"])
            if block.get("type") == "tool_use":
                yield ToolUseStarted(block.get("name", ""))
        elif kind == "content_block_stop":
            self.open.discard(event.get("index", -1))
        elif kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage = dict(message.get("usage") or {})  # the docs' own example has none
        elif kind == "message_delta":
            self.raw_stop = (event.get("delta") or {}).get("stop_reason") or self.raw_stop
            usage = event.get("usage") or {}
            self.usage.update((k, v) for k, v in usage.items() if v is not None)
        elif kind == "message_stop":
            self.stopped = True

    def response(self) -> ChatResponse:
        """The whole message, once `message_stop` came."""
        reason = stop_reason(self.raw_stop)
        content: list[ContentBlock] = []
        cut_call = False
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.get("type") == "text":
                content.append(TextBlock(text=block.get("text", "")))
            elif (kept := thinking_of(block)) is not None:
                content.append(kept)
            elif block.get("type") == "tool_use":
                tool_input = self._tool_input(index, reason)
                if tool_input is None:
                    cut_call = True
                    continue
                content.append(ToolUseBlock(id=block["id"], name=block["name"], input=tool_input))
        return ChatResponse(
            message=Message(role="assistant", content=list(content)),
            stop_reason=reason,
            usage=usage_of(self.usage),
            provider="anthropic",
            model=self.model,
            cut_tool_call=cut_call,
        )

    def _tool_input(self, index: int, reason: StopReason) -> dict[str, Any] | None:
        """A tool call's input, or None for one the output limit cut midway."""
        if reason == "max_tokens" and index in self.open:
            return None
        try:
            value = json.loads("".join(self.json_parts.get(index, [])) or "{}")
        except ValueError as exc:
            if reason == "max_tokens":
                return None
            raise ProviderRejected("anthropic", "a streamed tool call had broken JSON") from exc
        return value if isinstance(value, dict) else {}

    def partial(self) -> ChatResponse:
        """What a broken stream had carried: its text and usage, stop reason "cut"."""
        text = "".join(
            self.blocks[i].get("text", "")
            for i in sorted(self.blocks)
            if self.blocks[i].get("type") == "text"
        )
        return ChatResponse(
            message=Message.assistant(text) if text else Message(role="assistant", content=[]),
            stop_reason="cut",
            usage=usage_of(self.usage),
            provider="anthropic",
            model=self.model,
        )
