"""Platform-neutral handling of the Markdown the model writes: blocks and splitting.

Markdown is cut into blocks (fenced code, or paragraphs) so each platform converts a block
on its own and every converted piece has balanced markup; long blocks are cut on line, then
word boundaries, never inside a code fence without closing and reopening it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_FENCE = re.compile(r"^```([\w+-]*)\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_BULLET = re.compile(r"^(\s*)[-*]\s+")

TOO_LONG = (
    "That message is too long for me ({length:,} characters; my limit is {limit:,}). "
    "Could you shorten it or split it up?"
)


def too_long(length: int, limit: int) -> str:
    """The polite answer to a message over the length limit."""
    return TOO_LONG.format(length=length, limit=limit)


def render_paragraph(text: str, inline: Callable[[str], str], heading: Callable[[str], str]) -> str:
    """A paragraph line by line: headings through `heading`, list bullets as •, the rest inline."""
    lines = []
    for line in text.split("\n"):
        title = _HEADING.match(line)
        if title:
            lines.append(heading(inline(title.group(1))))
            continue
        bullet = _BULLET.match(line)
        if bullet:
            line = f"{bullet.group(1)}• {line[bullet.end() :]}"
        lines.append(inline(line))
    return "\n".join(lines)


@dataclass(frozen=True)
class Block:
    text: str
    code: bool = False
    language: str = ""


def blocks(markdown: str) -> list[Block]:
    """Fenced code blocks and paragraphs, in order."""
    out: list[Block] = []
    paragraph: list[str] = []
    code: list[str] | None = None
    language = ""

    def flush() -> None:
        if paragraph and any(line.strip() for line in paragraph):
            out.append(Block("\n".join(paragraph).strip("\n")))
        paragraph.clear()

    for line in markdown.replace("\r\n", "\n").split("\n"):
        fence = _FENCE.match(line.strip())
        if code is not None:
            if line.strip() == "```":
                out.append(Block("\n".join(code), code=True, language=language))
                code = None
            else:
                code.append(line)
        elif fence:
            flush()
            code, language = [], fence.group(1)
        elif not line.strip():
            flush()
        else:
            paragraph.append(line)
    if code is not None:  # an unclosed fence: still code
        out.append(Block("\n".join(code), code=True, language=language))
    flush()
    return out


def _pieces(text: str, limit: int) -> Iterator[str]:
    """Cut text into pieces of at most `limit` characters, on lines, then words."""
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


def split_rendered(
    markdown: str, render: Callable[[Block], str], limit: int, separator: str = "\n\n"
) -> list[str]:
    """Render Markdown block by block and pack the results into messages of `limit` chars."""
    rendered: list[str] = []
    for block in blocks(markdown):
        piece = render(block)
        if len(piece) <= limit:
            rendered.append(piece)
            continue
        # Too long: cut the source smaller until every rendered piece fits.
        size = max(64, limit // 2)
        while True:
            parts = [
                render(Block(part, block.code, block.language))
                for part in _pieces(block.text, size)
            ]
            if all(len(p) <= limit for p in parts) or size <= 64:
                rendered.extend(parts)
                break
            size //= 2
    messages: list[str] = []
    current = ""
    for piece in rendered:
        candidate = f"{current}{separator}{piece}" if current else piece
        if len(candidate) > limit and current:
            messages.append(current)
            current = piece
        else:
            current = candidate
    if current:
        messages.append(current)
    return messages or [""]
