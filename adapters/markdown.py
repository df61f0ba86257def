"""The model's Markdown, parsed once with markdown-it-py and rendered block by block.

A reply is a sequence of top-level blocks (paragraphs, headings, lists, quotes, code, tables,
rules). A platform supplies a `Style` that renders inline spans and blocks; every block is
rendered on its own from the one parse, so each rendered piece has balanced markup, and
pieces are packed into messages within the platform's limit. Only a block too long for one
message is parsed again: cut in its source on line, then word boundaries, and each part
rendered anew.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

# CommonMark with GitHub's tables and ~~strikethrough~~; raw HTML stays text.
_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

MIN_PIECE = 64  # the smallest source piece a long block is cut into

# Slack's own `<@U…>`, `<#C…|name>`, `<!here>` tokens would parse as autolinks or e-mail
# addresses; they are set aside before parsing and handed to `Style.special` afterwards.
_SPECIAL = re.compile(r"<[@#!][^<>\s|]+(?:\|[^<>\n]*)?>")
_HOLE = re.compile("\ue000(\\d+)\ue001")


class Style(Protocol):
    """How one platform writes each kind of span and block."""

    def text(self, text: str) -> str: ...
    def bold(self, inner: str) -> str: ...
    def italic(self, inner: str) -> str: ...
    def strike(self, inner: str) -> str: ...
    def code(self, text: str) -> str: ...
    def link(self, url: str, label: str) -> str: ...
    def heading(self, inner: str) -> str: ...
    def quote(self, inner: str) -> str: ...
    def code_block(self, text: str, language: str) -> str: ...
    def table(self, text: str) -> str: ...
    def rule(self) -> str: ...
    def special(self, token: str) -> str: ...


@dataclass(frozen=True)
class Source:
    """One top-level block: its Markdown source and whether it is code (cut differently)."""

    text: str
    code: bool = False


def _parse(markdown: str, style: Style) -> list[tuple[SyntaxTreeNode, Callable[[str], str]]]:
    """The top-level nodes of a Markdown text, each with what puts the platform's own tokens
    back into its rendering."""
    tokens: list[str] = []

    def hole(match: re.Match[str]) -> str:
        tokens.append(match.group(0))
        return f"\ue000{len(tokens) - 1}\ue001"

    def raw(text: str) -> str:
        return _HOLE.sub(lambda m: tokens[int(m.group(1))], text)

    def special(rendered: str) -> str:
        return _HOLE.sub(lambda m: style.special(tokens[int(m.group(1))]), rendered)

    protected = _SPECIAL.sub(hole, markdown.replace("\ue000", "").replace("\ue001", ""))
    root = SyntaxTreeNode(_PARSER.parse(protected.replace("\r\n", "\n")))
    for node in root.walk():  # inside code a token is shown as written, never live
        if node.type in ("fence", "code_block", "code_inline") and node.token is not None:
            node.token.content = raw(node.token.content)
    return [(node, special) for node in root.children]


def render(markdown: str, style: Style) -> str:
    """All of a Markdown text in one platform's markup (blocks separated by a blank line)."""
    return "\n\n".join(
        out for node, special in _parse(markdown, style) if (out := special(_block(node, style)))
    )


def split(markdown: str, style: Style, limit: int, separator: str = "\n\n") -> list[str]:
    """Render and pack into messages of at most `limit` characters, each with balanced markup."""
    # a special token spans no line, so the parsed lines are the source's lines
    lines = markdown.replace("\r\n", "\n").split("\n")
    pieces: list[str] = []
    for node, special in _parse(markdown, style):
        if node.map is None:
            continue
        start, end = node.map
        text = "\n".join(lines[start:end]).strip("\n")
        if not text.strip():
            continue
        rendered = special(_block(node, style))
        if len(rendered) <= limit:
            pieces.extend([rendered] if rendered else [])
        else:
            pieces.extend(
                _fit(Source(text, code=node.type in ("fence", "code_block")), style, limit)
            )
    messages: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}{separator}{piece}" if current else piece
        if len(candidate) > limit and current:
            messages.append(current)
            current = piece
        else:
            current = candidate
    if current:
        messages.append(current)
    return messages or [""]


def _fit(source: Source, style: Style, limit: int) -> list[str]:
    rendered = render(source.text, style)
    if len(rendered) <= limit:
        return [rendered] if rendered else []
    body, fence = _unfenced(source)
    size = max(MIN_PIECE, limit // 2)
    while True:
        parts = [render(fence(part), style) for part in _cut(body, size)]
        if all(len(p) <= limit for p in parts) or size <= MIN_PIECE:
            return [p for p in parts if p]
        size //= 2


def _unfenced(source: Source) -> tuple[str, Fence]:
    """A code block's body and a way to fence a part of it the same way again."""
    if not source.code:
        return source.text, _Plain()
    lines = source.text.split("\n")
    opening = lines[0].strip()
    if opening.startswith(("```", "~~~")):
        marker = opening[:3]
        end = -1 if len(lines) > 1 and lines[-1].strip().startswith(marker) else len(lines)
        return "\n".join(lines[1:end]), _Fenced(opening, marker)
    return source.text, _Fenced("```", "```")  # an indented block becomes a fence


class Fence(Protocol):
    def __call__(self, part: str) -> str: ...


class _Plain:
    def __call__(self, part: str) -> str:
        return part


@dataclass(frozen=True)
class _Fenced:
    opening: str
    marker: str

    def __call__(self, part: str) -> str:
        return f"{self.opening}\n{part}\n{self.marker}"


def _cut(text: str, limit: int) -> Iterator[str]:
    """Pieces of at most `limit` characters, cut on lines, then words."""
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            head, line = line[:cut], line[cut:].lstrip(" ")
            if current:
                yield current
                current = ""
            yield head
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > limit and current:
            yield current
            current = line
        else:
            current = candidate
    if current:
        yield current


# --- rendering --------------------------------------------------------------------------------


def _block(node: SyntaxTreeNode, style: Style, depth: int = 0) -> str:
    kind = node.type
    if kind == "paragraph":
        return _inline_children(node, style)
    if kind == "heading":
        return style.heading(_inline_children(node, style))
    if kind in ("fence", "code_block"):
        language = (node.info or "").strip().split(" ")[0]
        return style.code_block(node.content.rstrip("\n"), language)
    if kind == "blockquote":
        return style.quote("\n".join(_block(child, style, depth) for child in node.children))
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, style, depth)
    if kind == "table":
        return style.table(_table_text(node, style))
    if kind == "hr":
        return style.rule()
    return style.text(node.content) if node.content else ""


def _list(node: SyntaxTreeNode, style: Style, depth: int) -> str:
    ordered = node.type == "ordered_list"
    number = int(str(node.attrs.get("start", 1))) if ordered else 0
    indent = "    " * depth
    lines: list[str] = []
    for item in node.children:
        marker = f"{number}." if ordered else "•"
        number += 1
        parts = [_block(child, style, depth + 1) for child in item.children]
        first, *rest = [p for p in parts if p] or [""]
        lines.append(f"{indent}{marker} {first}")
        lines.extend(rest)
    return "\n".join(lines)


def _table_text(node: SyntaxTreeNode, style: Style) -> str:
    """A table as aligned plain-text columns (neither platform draws tables)."""
    rows: list[list[str]] = []
    for section in node.children:  # thead, tbody
        for row in section.children:
            rows.append([_plain(cell) for cell in row.children])
    if not rows:
        return ""
    columns = max(len(row) for row in rows)
    for cells in rows:
        cells.extend([""] * (columns - len(cells)))
    widths = [max(len(row[i]) for row in rows) for i in range(columns)]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _plain(node: SyntaxTreeNode) -> str:
    """The visible text of a node, with no markup."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain(child) for child in node.children)


def _inline_children(node: SyntaxTreeNode, style: Style) -> str:
    return "".join(_inline(child, style) for child in node.children)


def _inline(node: SyntaxTreeNode, style: Style) -> str:
    kind = node.type
    if kind == "inline":
        return _inline_children(node, style)
    if kind == "text":
        return style.text(node.content)
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "code_inline":
        return style.code(node.content)
    if kind == "strong":
        return style.bold(_inline_children(node, style))
    if kind == "em":
        return style.italic(_inline_children(node, style))
    if kind == "s":
        return style.strike(_inline_children(node, style))
    if kind == "link":
        label = _inline_children(node, style)
        return style.link(str(node.attrs.get("href", "")), label)
    if kind == "image":
        return style.link(str(node.attrs.get("src", "")), style.text(_plain(node) or "image"))
    return style.text(node.content) if node.content else _inline_children(node, style)


def is_web_url(url: str) -> bool:
    return url.lower().startswith(("http://", "https://", "mailto:", "tg://"))
