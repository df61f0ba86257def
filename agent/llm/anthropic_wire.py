"""Parley's neutral messages as the Messages API's JSON."""

from __future__ import annotations

from typing import Any

from agent.messages import (
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

CACHE = {"type": "ephemeral"}


def to_wire(message: Message, *, thinking: bool = False) -> dict[str, Any]:
    """A message as the API's JSON; thinking blocks only for a model that thinks (`thinking`),
    exactly as they came."""
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            if thinking:
                content.append(block.model_dump())
        elif isinstance(block, TextBlock):
            if block.text:
                content.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolUseBlock):
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
        elif isinstance(block, ToolResultBlock):
            content.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.tool_use_id,
                    "content": block.content,
                    "is_error": block.is_error,
                }
            )
        elif isinstance(block, ImageBlock):
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
            content.append({"type": "image", "source": source})
    # The API rejects empty content; a lone placeholder keeps the turn structure valid.
    return {"role": message.role, "content": content or [{"type": "text", "text": "…"}]}
