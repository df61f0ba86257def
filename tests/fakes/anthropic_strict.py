"""The fake Messages API's strict current-generation mode: the contract of the models whose
thinking is always on (`claude-sonnet-5-5`, `claude-haiku-5-5`), applied whenever a request
names one of them, as the real API does.

Each rule names the documentation page it comes from:

- "What's new in Sonnet 5.5" and the Sonnet 5.5 migration guide: a request without
  `thinking` runs adaptive thinking; `thinking: {"type": "disabled"}` is refused (the message
  points to `between_tools`), and so are `budget_tokens`, `temperature` / `top_p` / `top_k`,
  assistant prefill and forced `tool_choice` (`any`, `tool`); effort is
  `output_config.effort`. Text between tool calls comes back in `thinking` blocks, with their
  text when `display` is `summarized` and without it when it is `omitted` (the default).
- "Handling stop reasons" and the extended-thinking rules it links: with thinking on, a final
  assistant turn that used tools must start with a thinking block ("a final `assistant`
  message must start with a thinking block").
- "Preserved thinking" and "Prefix checks on thinking blocks": thinking blocks come back
  exactly as they were sent (an altered block's signature is invalid), and each is bound to
  its prefix (system, tools, every earlier message, and the blocks before it in its turn). A
  changed prefix fails the check for that block and every later one: a 400 ("The block is
  bound to a different conversation"), unless the request sets
  `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` with the beta header
  `thinking-binding-controls-2026-08-01`; then the blocks are dropped and listed in the
  response's `input_transformations`.

The fake gives every scripted answer a thinking block (a leading text block before a tool
call becomes its text, as the API returns text between tool calls), signs each block, and
remembers the prefix it was written after.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

CURRENT_GENERATION = frozenset({"claude-sonnet-5-5", "claude-haiku-5-5"})
BINDING_BETA = "thinking-binding-controls-2026-08-01"
EFFORTS = ("low", "medium", "high", "xhigh", "max")
FINAL_TURN = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
    "We recommend you include thinking blocks from previous turns."
)
BOUND_ELSEWHERE = (
    "messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound to "
    "a different conversation. Remove the block, or set "
    '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
)
ALTERED = "messages.{i}.content.{j}: Invalid `signature` in `thinking` block."
DEFAULT_THOUGHT = "Working out what the person needs."
_serial = itertools.count(1)


class Refused(Exception):
    """A request the strict API answers with 400 invalid_request_error."""


def is_strict(body: dict[str, Any]) -> bool:
    return str(body.get("model", "")) in CURRENT_GENERATION


def _plain(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


@dataclass
class StrictAPI:
    """What the strict mode remembers across requests: the blocks it signed."""

    # signature → (the thinking text as returned, the digest of its prefix)
    signed: dict[str, tuple[str, str]] = field(default_factory=dict)
    redacted: dict[str, str] = field(default_factory=dict)  # data → prefix digest
    dropped: list[dict[str, Any]] = field(default_factory=list)  # input_transformations sent
    last_dropped: list[dict[str, Any]] = field(default_factory=list)

    # -- requests -----------------------------------------------------------------------

    def check(self, body: dict[str, Any], headers: Any) -> None:
        """Raise `Refused` for a request the current generation refuses; drop mismatched
        blocks from `body` in place when the request asks for that."""
        self.last_dropped = []
        thinking = body.get("thinking")
        if thinking is not None:
            kind = thinking.get("type") if isinstance(thinking, dict) else None
            if kind == "disabled":
                raise Refused(
                    'thinking.type: "disabled" is not supported on this model. To turn off '
                    'up-front thinking, use {"type": "between_tools"}.'
                )
            if "budget_tokens" in thinking or kind == "enabled":
                raise Refused(
                    "thinking.budget_tokens is not supported on this model: thinking is "
                    "adaptive; use output_config.effort to control its depth."
                )
            if kind not in ("adaptive", "between_tools"):
                raise Refused(f"thinking.type: unknown value {kind!r}")
            display = thinking.get("display")
            if display is not None and display not in ("summarized", "omitted"):
                raise Refused(f"thinking.display: unknown value {display!r}")
        effort = (body.get("output_config") or {}).get("effort")
        if effort is not None and effort not in EFFORTS:
            raise Refused(f"output_config.effort: must be one of {', '.join(EFFORTS)}")
        if (thinking or {}).get("type") == "between_tools" and effort in ("xhigh", "max"):
            raise Refused("thinking.type between_tools is not supported at xhigh or max effort")
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                raise Refused(f"`{name}` is not supported on this model.")
        choice = body.get("tool_choice") or {}
        if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
            raise Refused(
                "Forced tool use is not supported on this model: tool_choice type must be "
                '"auto" or "none".'
            )
        messages = body.get("messages") or []
        if messages and messages[-1].get("role") == "assistant":
            raise Refused(
                "This model does not support assistant message prefill. The conversation "
                "must end with a user message."
            )
        self._check_final_turn(messages)
        self._check_bindings(body, headers)

    def _check_final_turn(self, messages: list[dict[str, Any]]) -> None:
        last_assistant = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"),
            None,
        )
        if last_assistant is None:
            return
        content = _blocks(messages[last_assistant].get("content"))
        if not any(b.get("type") == "tool_use" for b in content):
            return
        first = content[0].get("type") if content else "nothing"
        if first not in ("thinking", "redacted_thinking"):
            raise Refused(FINAL_TURN.format(i=last_assistant, found=first))

    def _check_bindings(self, body: dict[str, Any], headers: Any) -> None:
        thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
        binding = (thinking or {}).get("block_binding") or {}
        drop = binding.get("prefix_mismatch_behavior") == "drop_block"
        beta = {str(k).lower(): str(v) for k, v in dict(headers).items()}.get("anthropic-beta", "")
        if drop and BINDING_BETA not in beta:
            raise Refused(
                f"thinking.block_binding requires the beta header anthropic-beta: {BINDING_BETA}"
            )
        prefix = Prefix(body)
        invalid = False  # once one block fails, every later one does
        for i, message in enumerate(body.get("messages") or []):
            content = _blocks(message.get("content"))
            kept: list[Any] = []
            for j, block in enumerate(content):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind in ("thinking", "redacted_thinking") and message["role"] == "assistant":
                    digest = prefix.digest(i, content[:j])
                    if kind == "thinking":
                        known = self.signed.get(block.get("signature", ""))
                        if known is None or known[0] != block.get("thinking", ""):
                            raise Refused(ALTERED.format(i=i, j=j))
                        bound = known[1]
                    else:
                        bound = self.redacted.get(block.get("data", ""), "")
                        if not bound:
                            raise Refused(f"messages.{i}.content.{j}: invalid redacted_thinking")
                    invalid = invalid or bound != digest
                    if invalid:
                        if not drop:
                            raise Refused(BOUND_ELSEWHERE.format(i=i, j=j))
                        self.last_dropped.append(
                            {
                                "type": "thinking_dropped",
                                "path": f"messages.{i}.content.{j}",
                                "reason": "prefix_mismatch",
                            }
                        )
                        continue
                kept.append(block)
            prefix.add(i, message.get("role", ""), kept)
        self.dropped += self.last_dropped

    # -- responses ----------------------------------------------------------------------

    def shape(self, content: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
        """A scripted answer as the current generation returns it, its blocks signed."""
        shaped: list[dict[str, Any]] = []
        pending_text: dict[str, Any] | None = None
        for block in content:
            if block["type"] == "text":
                if pending_text is not None:
                    shaped.append(pending_text)
                pending_text = block
                continue
            if block["type"] == "tool_use" and not _thought_before(shaped):
                # text between tool calls comes back as a thinking block
                note = pending_text["text"] if pending_text is not None else DEFAULT_THOUGHT
                shaped.append({"type": "thinking", "thinking": note})
                pending_text = None
            elif pending_text is not None:
                shaped.append(pending_text)
                pending_text = None
            shaped.append(block)
        if pending_text is not None:
            shaped.append(pending_text)
        if not any(b["type"] in ("thinking", "redacted_thinking") for b in shaped):
            shaped.insert(0, {"type": "thinking", "thinking": DEFAULT_THOUGHT})
        shown = (body.get("thinking") or {}).get("display") == "summarized"
        signed: list[dict[str, Any]] = []
        for block in shaped:
            if block["type"] == "thinking" and not block.get("signature"):
                text = block["thinking"] if shown else ""
                signed.append({"type": "thinking", "thinking": text, "signature": _sign(text)})
            elif block["type"] == "redacted_thinking" and not block.get("data"):
                signed.append({"type": "redacted_thinking", "data": _sign("redacted")})
            else:
                signed.append(block)
        self.remember(signed, body)
        return signed

    def remember(self, content: list[dict[str, Any]], body: dict[str, Any]) -> None:
        """Bind each thinking block of an answer to the request and the blocks before it."""
        prefix = Prefix(body)
        for i, message in enumerate(body.get("messages") or []):
            prefix.add(i, message.get("role", ""), _blocks(message.get("content")))
        turn = len(body.get("messages") or [])
        for j, block in enumerate(content):
            if block.get("type") == "thinking":
                bound = prefix.digest(turn, content[:j])
                self.signed[block["signature"]] = (block["thinking"], bound)
            elif block.get("type") == "redacted_thinking":
                self.redacted[block["data"]] = prefix.digest(turn, content[:j])

    def remember_events(self, events: Any, body: dict[str, Any]) -> None:
        """The same for a recorded stream: its blocks, assembled from the events."""
        blocks: dict[int, dict[str, Any]] = {}
        for name, data in events:
            if name == "content_block_start":
                blocks[data["index"]] = dict(data["content_block"])
            elif name == "content_block_delta":
                block, delta = blocks[data["index"]], data["delta"]
                if delta["type"] == "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + delta["thinking"]
                elif delta["type"] == "signature_delta":
                    block["signature"] = block.get("signature", "") + delta["signature"]
                elif delta["type"] == "text_delta":
                    block["text"] = block.get("text", "") + delta["text"]
                elif delta["type"] == "input_json_delta":
                    block["_json"] = block.get("_json", "") + delta["partial_json"]
        content = []
        for index in sorted(blocks):
            block = blocks[index]
            if block.get("type") == "tool_use":
                raw = block.pop("_json", "")
                try:
                    block["input"] = json.loads(raw) if raw else {}
                except ValueError:  # a call the output limit cut: not part of the answer
                    continue
            content.append(block)
        self.remember(content, body)


def _thought_before(shaped: list[dict[str, Any]]) -> bool:
    """Whether the blocks so far end in thinking (so a tool call has its thought)."""
    return bool(shaped) and shaped[-1]["type"] in ("thinking", "redacted_thinking")


def _sign(text: str) -> str:
    raw = hashlib.sha256(f"{next(_serial)}:{text}".encode()).digest()
    return "Eq" + base64.b64encode(raw).decode()


class Prefix:
    """The digest of a request's prefix up to a place: system and tools, the messages before
    it, and the blocks before it in its own message (cache_control markers aside)."""

    def __init__(self, body: dict[str, Any]) -> None:
        system = body.get("system")
        head = {
            "system": [_plain(b) for b in _blocks(system)] if system else [],
            "tools": [_plain(t) for t in body.get("tools") or []],
        }
        self.hash = hashlib.sha256(json.dumps(head, sort_keys=True).encode())

    def add(self, index: int, role: str, content: list[Any]) -> None:
        kept = [index, role, [_plain(b) for b in content]]
        self.hash.update(json.dumps(kept, sort_keys=True).encode())

    def digest(self, index: int, before: list[Any]) -> str:
        copy = self.hash.copy()
        partial = [index, "assistant", [_plain(b) for b in before]]
        copy.update(b"|" + json.dumps(partial, sort_keys=True).encode())
        return copy.hexdigest()
