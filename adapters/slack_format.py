"""The model's Markdown as Slack mrkdwn, and messages as Block Kit within Slack's limits."""

from __future__ import annotations

import re
from typing import Any

from adapters.base import OutboundMessage
from adapters.text import Block, render_paragraph, split_rendered

SECTION_LIMIT = 3000  # characters of one section block's text
BLOCKS_PER_MESSAGE = 48  # Slack allows 50; room for the actions block
FALLBACK_LIMIT = 3000  # the notification text shown beside the blocks

_INLINE = re.compile(
    r"(?P<special><[@#!][A-Za-z0-9^|_.-]+>)"  # Slack's own mentions stay as they are
    r"|(?P<code>`[^`\n]+`)"
    r"|(?P<link>\[(?P<label>[^\]\n]+)\]\((?P<url>https?://[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<bold_text>[^*\n]+?)\*\*|__(?P<bold_text2>[^_\n]+?)__)"
    r"|(?P<italic>(?<![\w*])\*(?P<italic_text>[^*\n]+?)\*(?![\w*]))"
    r"|(?P<strike>~~(?P<strike_text>[^~\n]+?)~~)"
)


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def inline(text: str) -> str:
    out: list[str] = []
    position = 0
    for match in _INLINE.finditer(text):
        out.append(escape(text[position : match.start()]))
        if match.group("special"):
            out.append(match.group("special"))
        elif match.group("code"):
            out.append(f"`{escape(match.group('code')[1:-1])}`")
        elif match.group("link"):
            out.append(f"<{match.group('url')}|{escape(match.group('label'))}>")
        elif match.group("bold"):
            out.append(f"*{inline(match.group('bold_text') or match.group('bold_text2'))}*")
        elif match.group("italic"):
            out.append(f"_{inline(match.group('italic_text'))}_")
        else:
            out.append(f"~{inline(match.group('strike_text'))}~")
        position = match.end()
    out.append(escape(text[position:]))
    return "".join(out)


def render_block(block: Block) -> str:
    if block.code:
        return f"```\n{escape(block.text)}\n```"
    return render_paragraph(block.text, inline, lambda text: f"*{text}*")


def to_mrkdwn(markdown: str) -> str:
    return "\n\n".join(split_rendered(markdown, render_block, 10**9))


def messages(message: OutboundMessage) -> list[tuple[str, list[dict[str, Any]]]]:
    """(fallback text, blocks) per Slack message; buttons go on the last one."""
    sections = split_rendered(message.text or "…", render_block, SECTION_LIMIT)
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
            "value": f"{message.decision_id}:{button.value}",
        }
        if button.style:
            element["style"] = button.style
        elements.append(element)
    return {"type": "actions", "block_id": f"decision:{message.decision_id}", "elements": elements}
