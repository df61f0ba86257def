"""The model's Markdown as Slack mrkdwn, and messages as Block Kit within Slack's limits.

Slack pings people for `<@U…>`, `<!subteam^…>`, `<!here>`, `<!channel>` and `<!everyone>`
(and, in mrkdwn and markdown that Slack parses, a bare `@here`, `@channel`, `@everyone`).
Parley writes what a model and tools produced, so a mention pings only when the message
allows it (the requester typed it, or Parley names someone itself); any other is shown as
plain text that pings nobody. `quiet` is that one rule, for posts and edits (through
`SlackMrkdwn`) and for streamed Markdown (`streamed_markdown`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from adapters.base import OutboundMessage
from adapters.markdown import is_web_url, split

SECTION_LIMIT = 3000  # characters of one section block's text
BLOCKS_PER_MESSAGE = 48  # Slack allows 50; room for the actions block
FALLBACK_LIMIT = 3000  # the notification text shown beside the blocks

_SPECIAL = re.compile(r"<(?P<kind>[@#!])(?P<target>[A-Za-z0-9^_.-]+)(?:\|(?P<label>[^<>]*))?>")
_QUIET = "\u2060"  # word joiner: "@\u2060here" reads as @here and pings nobody
_BROADCAST = re.compile(r"@(?=(?:here|channel|everyone)\b)", re.IGNORECASE)
# the end of a text that may still become a mention when more of it arrives
_UNFINISHED = re.compile(r"(?:<[@#!][^<>]*|<|@[A-Za-z]{0,8})\Z")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quiet(token: str, allowed: frozenset[str]) -> str:
    """A Slack mention token as it may appear: itself when allowed or when it pings nobody
    (`<#C…>`, `<!date^…>`), else its name after an invisible joiner."""
    match = _SPECIAL.fullmatch(token)
    if match is None:
        return escape(token)
    kind, target, label = match["kind"], match["target"], match["label"]
    pings = kind == "@" or (kind == "!" and not target.startswith("date^"))
    if not pings or f"{kind}{target}" in allowed:
        return match.group(0)
    if kind == "!" and target.startswith("subteam^"):
        name = (label or target.partition("^")[2]).lstrip("@")
    else:
        name = label or target
    return f"@{_QUIET}{escape(name)}"


def quiet_broadcasts(text: str, allowed: frozenset[str]) -> str:
    """A bare `@here` / `@channel` / `@everyone` pings nobody unless its token is allowed."""

    def one(match: re.Match[str]) -> str:
        word = re.match(r"[a-z]+", text[match.end() :], re.IGNORECASE)
        return "@" if word and f"!{word.group(0).lower()}" in allowed else "@" + _QUIET

    return _BROADCAST.sub(one, text)


def streamed_markdown(markdown: str, allowed: frozenset[str], *, final: bool) -> str:
    """The model's Markdown as a chat stream may carry it, with the same mention rule as
    posts. Unless `final`, an end that may still grow into a mention (`<!chan`, `@her`) is
    held back, so what is sent never has to change when the rest arrives; so is trailing
    whitespace, which the final answer may not have (it is trimmed)."""
    if not final:
        markdown = _UNFINISHED.sub("", markdown).rstrip()
    tokens = _SPECIAL.sub(lambda m: quiet(m.group(0), allowed), markdown)
    return quiet_broadcasts(tokens, allowed)


def mention_key(token: str) -> str | None:
    """`<@U1>` → `@U1`, `<!subteam^S1|@eng>` → `!subteam^S1`; None if not a Slack token."""
    match = _SPECIAL.fullmatch(token.strip())
    return f"{match['kind']}{match['target']}" if match else None


class SlackMrkdwn:
    """Slack's mrkdwn, with mentions allowed only from `allowed` (keys as `mention_key`)."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = frozenset(allowed)

    def text(self, text: str) -> str:
        return quiet_broadcasts(escape(text), self.allowed)

    def special(self, token: str) -> str:
        return quiet(token, self.allowed)

    def bold(self, inner: str) -> str:
        return f"*{inner}*"

    def italic(self, inner: str) -> str:
        return f"_{inner}_"

    def strike(self, inner: str) -> str:
        return f"~{inner}~"

    def code(self, text: str) -> str:
        return f"`{escape(text)}`"

    def link(self, url: str, label: str) -> str:
        if not is_web_url(url):
            return label
        url = url.replace("|", "%7C").replace(">", "%3E").replace("<", "%3C")
        return f"<{url}|{label}>" if label else f"<{url}>"

    def heading(self, inner: str) -> str:
        return f"*{inner}*"

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}" for line in inner.split("\n"))

    def code_block(self, text: str, language: str) -> str:
        return f"```\n{escape(text)}\n```"

    def table(self, text: str) -> str:
        return f"```\n{escape(text)}\n```"

    def rule(self) -> str:
        return "──────────"


def allowed_keys(tokens: Iterable[str]) -> frozenset[str]:
    """Allowed mention tokens (`<!here>`) as `mention_key`s (`!here`)."""
    return frozenset(key for token in tokens if (key := mention_key(token)) is not None)


def messages(message: OutboundMessage) -> list[tuple[str, list[dict[str, Any]]]]:
    """(fallback text, blocks) per Slack message; buttons go on the last one."""
    style = SlackMrkdwn(allowed_keys(message.allowed_mentions))
    sections = split(message.text or "…", style, SECTION_LIMIT)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": s}} for s in sections
    ]
    out = []
    for start in range(0, len(blocks), BLOCKS_PER_MESSAGE):
        chunk = blocks[start : start + BLOCKS_PER_MESSAGE]
        fallback = chunk[0]["text"]["text"][:FALLBACK_LIMIT]
        out.append((fallback, chunk))
    if message.buttons and message.decision_id:
        out[-1][1].append(actions(message))
    return out


def actions(message: OutboundMessage) -> dict[str, Any]:
    elements = []
    for index, button in enumerate(message.buttons):
        element: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": button.label[:75]},
            "action_id": f"parley:{index}",
        }
        if button.url:  # Slack still reports the press; with no value it is ignored
            element["url"] = button.url
        else:
            element["value"] = f"{message.decision_id}:{button.value}"
        if button.style:
            element["style"] = button.style
        elements.append(element)
    return {"type": "actions", "block_id": f"decision:{message.decision_id}", "elements": elements}
