"""Keeping the prompt inside the model's window.

Tokens are estimated (about four characters each, which errs high for English). When the
next request would not fit, the oldest turns are folded into a running summary that the
model writes, and dropped from the state. A cut never falls between a tool_use and its
tool_result: it only lands before an assistant turn or a plain user turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.framing import frame
from agent.llm.base import ChatModel
from agent.messages import (
    ChatRequest,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from agent.observations import clean
from agent.prompts import SUMMARY_SYSTEM_PROMPT
from agent.state import RunState

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role markers and block framing, in tokens
# Anthropic bills an image at about width × height / 750 tokens, capped near 1600 once scaled.
IMAGE_TOKENS_MAX = 1600
CONTINUATION = "(Earlier turns of this conversation are summarised in the system prompt.)"


def estimate_text(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


def estimate_image(image: ImageBlock) -> int:
    if not image.width or not image.height:
        return IMAGE_TOKENS_MAX
    return min(IMAGE_TOKENS_MAX, image.width * image.height // 750 + 1)


def estimate_message(message: Message) -> int:
    # the context a thinking model's request carried before this turn goes with it again
    chars = len(message.context)
    images = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            chars += len(block.text)
        elif isinstance(block, ToolUseBlock):
            chars += len(block.name) + len(block.id) + len(json.dumps(block.input, default=str))
        elif isinstance(block, ToolResultBlock):
            chars += len(block.tool_use_id) + len(block.content)
        elif isinstance(block, ThinkingBlock):
            chars += len(block.thinking)  # the signature is not billed as text
        elif isinstance(block, RedactedThinkingBlock):
            chars += len(block.data) // 2
        else:
            images += estimate_image(block)
    return chars // CHARS_PER_TOKEN + images + MESSAGE_OVERHEAD


def estimate_tools(tools: Sequence[ToolSpec]) -> int:
    return sum(estimate_text(t.name + t.description + json.dumps(t.input_schema)) for t in tools)


def estimate_request(request: ChatRequest) -> int:
    return (
        estimate_text(request.system)
        + sum(estimate_message(m) for m in request.messages)
        + estimate_tools(request.tools)
    )


def _is_safe_cut(messages: Sequence[Message], index: int) -> bool:
    """Whether the kept part may start at `index` without orphaning a tool_result."""
    message = messages[index]
    return not (message.role == "user" and message.tool_results)


def render_transcript(messages: Sequence[Message], limit: int = 2000) -> str:
    lines: list[str] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text.strip():
                lines.append(f"{message.role}: {clean(block.text, limit)}")
            elif isinstance(block, ToolUseBlock):
                args = clean(json.dumps(block.input, default=str), limit)
                lines.append(f"assistant called {block.name}({args})")
            elif isinstance(block, ToolResultBlock):
                kind = "error" if block.is_error else "result"
                lines.append(f"tool {kind}: {clean(block.content, limit)}")
            elif isinstance(block, ImageBlock):
                lines.append(f"{message.role} sent an image {block.name}".rstrip())
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class Window:
    tokens: int  # the whole request must stay under this
    tools: int  # tokens the tool specs take
    max_tokens: int = 1024  # cap on one summary call's output

    @property
    def summary_tokens(self) -> int:
        return max(100, self.tokens // 8)


async def fit(
    state: RunState,
    *,
    model: ChatModel,
    window: Window,
    system_for: Callable[[str], str],
) -> tuple[Usage, int]:
    """Fold old turns into `state.summary` until the next request fits; (usage, model calls)."""
    usage, calls = Usage(), 0

    def total(summary: str, messages: Sequence[Message]) -> int:
        return (
            estimate_text(system_for(summary))
            + sum(estimate_message(m) for m in messages)
            + window.tools
        )

    if total(state.summary, state.messages) <= window.tokens:
        return usage, calls
    # Room for messages once a full-size summary is in the system prompt; keep at most ~60%
    # of it so that trimming happens now and then, not before every step.
    fixed = estimate_text(system_for("")) + window.summary_tokens + window.tools
    keep_budget = max(0, int((window.tokens - fixed) * 0.6))
    cut = _choose_cut(state.messages, keep_budget)
    if cut == 0:
        log.warning("the latest turn alone exceeds the context window; sending it anyway")
        return usage, calls
    folded = state.messages[:cut]
    summary = state.summary
    for chunk in _chunks(folded, window):
        summary, chunk_usage = await _summarize(model, summary, chunk, window)
        usage, calls = usage + chunk_usage, calls + 1
    kept = state.messages[cut:]
    if kept[0].role == "assistant":
        kept.insert(0, Message.user(CONTINUATION))
    state.messages = kept
    state.summary = summary
    log.info("folded %d messages into the running summary (%d calls)", cut, calls)
    return usage, calls


def _choose_cut(messages: Sequence[Message], budget: int) -> int:
    """The earliest safe index whose suffix fits `budget`, or the latest safe one if none does."""
    suffix = 0
    best = 0
    latest_safe = 0
    for index in range(len(messages) - 1, 0, -1):
        suffix += estimate_message(messages[index])
        if not _is_safe_cut(messages, index):
            continue
        latest_safe = latest_safe or index
        if suffix > budget:
            break
        best = index
    return best or latest_safe


def _chunks(messages: Sequence[Message], window: Window) -> list[list[Message]]:
    """Groups of messages whose transcript fits in one summary request."""
    room = window.tokens - window.summary_tokens * 2 - estimate_text(SUMMARY_SYSTEM_PROMPT)
    room = max(room, 200)
    chunks: list[list[Message]] = [[]]
    size = 0
    for message in messages:
        cost = estimate_message(message)
        if chunks[-1] and size + cost > room:
            chunks.append([])
            size = 0
        chunks[-1].append(message)
        size += cost
    return chunks


async def _summarize(
    model: ChatModel, previous: str, messages: Sequence[Message], window: Window
) -> tuple[str, Usage]:
    words = window.summary_tokens * 3 // 4
    room_chars = max(800, (window.tokens - window.summary_tokens * 2) * CHARS_PER_TOKEN)
    transcript = render_transcript(messages)
    if len(transcript) > room_chars:  # one huge message: keep its start and end
        half = room_chars // 2
        transcript = transcript[:half] + "\n[…]\n" + transcript[-half:]
    body = frame("earlier_summary", previous or "(none)") + "\n\n" + frame("transcript", transcript)
    request = ChatRequest(
        system=SUMMARY_SYSTEM_PROMPT.format(words=words),
        messages=[Message.user(body)],
        max_tokens=min(window.max_tokens, window.summary_tokens * 2),
    )
    response = await model.complete(request)
    summary = response.message.text.strip() or previous
    limit = window.summary_tokens * CHARS_PER_TOKEN
    if len(summary) > limit:
        summary = summary[: limit - 1] + "…"
    return summary, response.usage
