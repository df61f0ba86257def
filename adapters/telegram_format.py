"""The model's Markdown as Telegram HTML (the one parse mode whose escaping is simple)."""

from __future__ import annotations

import html
import re

from adapters.text import Block, blocks, render_paragraph, split_rendered

MESSAGE_LIMIT = 4096

_INLINE = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<link>\[(?P<label>[^\]\n]+)\]\((?P<url>https?://[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<bold_text>[^*\n]+?)\*\*|__(?P<bold_text2>[^_\n]+?)__)"
    r"|(?P<italic>(?<![\w*])\*(?P<italic_text>[^*\n]+?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<italic_text2>[^_\n]+?)_(?![\w_]))"
    r"|(?P<strike>~~(?P<strike_text>[^~\n]+?)~~)"
)


def inline(text: str) -> str:
    """Escape text and turn inline Markdown into HTML tags."""
    out: list[str] = []
    position = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[position : match.start()], quote=False))
        if match.group("code"):
            out.append(f"<code>{html.escape(match.group('code')[1:-1], quote=False)}</code>")
        elif match.group("link"):
            url = html.escape(match.group("url"), quote=True)
            out.append(f'<a href="{url}">{inline(match.group("label"))}</a>')
        elif match.group("bold"):
            out.append(f"<b>{inline(match.group('bold_text') or match.group('bold_text2'))}</b>")
        elif match.group("italic"):
            inner = match.group("italic_text") or match.group("italic_text2")
            out.append(f"<i>{inline(inner)}</i>")
        else:
            out.append(f"<s>{inline(match.group('strike_text'))}</s>")
        position = match.end()
    out.append(html.escape(text[position:], quote=False))
    return "".join(out)


def render_block(block: Block) -> str:
    if block.code:
        body = html.escape(block.text, quote=False)
        if block.language:
            return f'<pre><code class="language-{block.language}">{body}</code></pre>'
        return f"<pre>{body}</pre>"
    return render_paragraph(block.text, inline, lambda text: f"<b>{text}</b>")


def to_html(markdown: str) -> str:
    return "\n\n".join(render_block(b) for b in blocks(markdown))


def split_html(markdown: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Telegram messages (HTML) of at most `limit` characters, each with balanced tags."""
    return split_rendered(markdown, render_block, limit)
