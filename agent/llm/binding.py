"""Requests for a model whose thinking is always on and bound to what came before it
(Anthropic's current generation: `catalog.thinks_always`).

What the API asks, and how Parley keeps it (Anthropic's "What's new in Sonnet 5.5", the
Sonnet 5.5 migration guide, "Preserved thinking" and "Prefix checks on thinking blocks"):

- Thinking blocks go back exactly as they came, signature and empty text included.
- Append-only: `system` and `tools` are the same on every call; what changes from step to
  step (the time, recalled memories, the running summary, the objective) goes at the end, in
  the newest user turn, and stays where it was sent. Each answer remembers the context its
  request carried (`Message.context`) and later requests send it again in that same place, so
  the prefix of every earlier thinking block is what it was. (In the system prompt it would
  change the prefix of every block whenever a memory or the clock did.)
- Each answer also remembers a digest of the prefix it was written after
  (`Message.bound_to`). A turn whose prefix has changed since (compaction folded turns before
  it, an image was dropped, another requester's results were hidden) goes out without its
  thinking instead of being refused, and so does every later one, whose prefix that changes.
- A tool call with no thinking before it (the local fallback wrote it, or its turn lost its
  thinking) goes out as text, its result too: the API refuses a final assistant turn that
  uses a tool without a thinking block first ("a final `assistant` message must start with a
  thinking block").
- Never sent: `temperature`, `top_p`, `top_k`, prefill, forced `tool_choice`,
  `thinking: disabled`, `budget_tokens` (all refused with 400). Effort is
  `output_config.effort`; `display: summarized` returns the progress notes written between
  tool calls, which feed the status line.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from agent.llm.anthropic_wire import CACHE, to_wire
from agent.llm.catalog import lookup, token_factor
from agent.messages import ChatRequest, ChatResponse, Message

log = logging.getLogger(__name__)

# Output room for thinking on top of the answer's own `max_tokens`: thinking counts
# towards the limit, and an answer cut by its own thinking helps nobody.
THINKING_ROOM = 8192
_DEFAULT_MAX_OUTPUT = 64_000


@dataclass(frozen=True)
class Sent:
    """What an answer must remember of the request that produced it."""

    context: str
    bound_to: str

    def stamp(self, response: ChatResponse) -> ChatResponse:
        if not self.bound_to:
            return response
        update = {"context": self.context, "bound_to": self.bound_to}
        message = response.message.model_copy(update=update)
        return response.model_copy(update={"message": message})


NOT_BOUND = Sent("", "")


def context_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": f"<context>\n{text}\n</context>"}


class _Prefix:
    """A running digest of the request's prefix as the API compares it (cache_control
    markers aside: they move from call to call and are not content)."""

    def __init__(self, system: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        self.hash = hashlib.sha256()
        self._feed({"system": system, "tools": tools})

    def _feed(self, value: Any) -> None:
        self.hash.update(json.dumps(value, sort_keys=True, ensure_ascii=False).encode())
        self.hash.update(b"\0")

    def add(self, message: dict[str, Any]) -> None:
        self._feed(message)

    def digest(self) -> str:
        return self.hash.copy().hexdigest()[:32]


def thinking_request(
    request: ChatRequest, *, model: str, effort: str | None, display: str
) -> tuple[dict[str, Any], Sent]:
    """The request's JSON for a thinking model, and what its answer must remember."""
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in request.tools
    ]
    stable = request.system[: request.system_stable or len(request.system)]
    changing = request.system[len(stable) :].strip()
    system: list[dict[str, Any]] = [{"type": "text", "text": stable}] if stable else []
    prefix = _Prefix(system, tools)
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # user turns not yet fed: context may still join them
    as_text: dict[str, str] = {}  # tool_use id → tool name, for calls sent as text
    for message in request.messages:
        if message.role == "user":
            pending.append(_user(message, as_text))
            continue
        if message.context:
            if not pending:
                pending.append({"role": "user", "content": []})
            pending[-1]["content"].append(context_block(message.context))
        for turn in pending:
            prefix.add(turn)
        messages += pending
        pending = []
        valid = bool(message.bound_to) and message.bound_to == prefix.digest()
        if message.thinking and not valid:
            log.info("a thinking block's prefix changed since it was written; sent without it")
        if message.tool_uses and not (valid and message.thinking):
            turn = _as_text(message, as_text)
        else:
            turn = to_wire(message, thinking=valid)
        prefix.add(turn)
        messages.append(turn)
    if changing:
        if not pending:  # never a prefill: the context makes a user turn of its own
            pending.append({"role": "user", "content": []})
        pending[-1]["content"].append(context_block(changing))
    for turn in pending:
        prefix.add(turn)
    messages += pending
    for turn in messages[-2:]:  # the last prior turn and the newest one
        turn["content"][-1] = {**turn["content"][-1], "cache_control": CACHE}
    if system:
        system[-1] = {**system[-1], "cache_control": CACHE}
    if tools:
        tools[-1] = {**tools[-1], "cache_control": CACHE}
    known = lookup(model)
    limit = known.max_output if known is not None else _DEFAULT_MAX_OUTPUT
    thinking: dict[str, Any] = {"type": "adaptive", "display": display}
    wire: dict[str, Any] = {
        "model": model,
        "max_tokens": min(limit, round(request.max_tokens * token_factor(model)) + THINKING_ROOM),
        "messages": messages,
        "thinking": thinking,
    }
    if effort:
        wire["output_config"] = {"effort": effort}
    if system:
        wire["system"] = system
    if tools:
        wire["tools"] = tools
    return wire, Sent(changing, prefix.digest())


def _user(message: Message, as_text: dict[str, str]) -> dict[str, Any]:
    """A user turn; the results of calls that went out as text go as text too."""
    wire = to_wire(message)
    content = []
    for block in wire["content"]:
        name = as_text.get(block.get("tool_use_id", "")) if block["type"] == "tool_result" else None
        if name is None:
            content.append(block)
            continue
        verb = "failed" if block.get("is_error") else "returned"
        content.append({"type": "text", "text": f"[{name} {verb}: {block['content']}]"})
    return {"role": "user", "content": content}


def _as_text(message: Message, as_text: dict[str, str]) -> dict[str, Any]:
    """An assistant turn whose tool calls go out as text (no thinking may come with them)."""
    content: list[dict[str, Any]] = []
    for block in to_wire(message)["content"]:
        if block["type"] == "tool_use":
            as_text[block["id"]] = block["name"]
            call = json.dumps(block["input"], ensure_ascii=False, sort_keys=True)
            content.append({"type": "text", "text": f"[I called {block['name']}({call})]"})
        else:
            content.append(block)
    return {"role": "assistant", "content": content}
