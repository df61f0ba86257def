"""The model's Markdown as Telegram HTML (the one parse mode whose escaping is simple).

Telegram notifies a group member named by `@username`. Parley writes what a model and tools
produced, so a username pings only when the requester typed it; any other is shown with an
invisible joiner after the `@` and pings nobody. Every send, edit, draft and streamed update
renders through `split_html`, so the rule holds on each of them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from adapters.markdown import is_web_url, split

MESSAGE_LIMIT = 4096
_USERNAME = re.compile(r"(?<![\w@])@([A-Za-z][A-Za-z0-9_]{4,31})\b")
_QUIET = "\u2060"  # word joiner: "@\u2060alice" reads as @alice and pings nobody


def quiet_usernames(text: str, allowed: frozenset[str]) -> str:
    """`@username` pings only when its (lower-cased) name is in `allowed`."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name.lower() in allowed else f"@{_QUIET}{name}"

    return _USERNAME.sub(one, text)


class TelegramHtml:
    """Telegram's HTML subset: b, i, s, code, pre, a, blockquote."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        # allowed mention tokens as a reply carries them; Telegram's are `@username`
        self.allowed = frozenset(t[1:].lower() for t in allowed if t.startswith("@"))

    def text(self, text: str) -> str:
        return quiet_usernames(html.escape(text, quote=False), self.allowed)

    def bold(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def italic(self, inner: str) -> str:
        return f"<i>{inner}</i>"

    def strike(self, inner: str) -> str:
        return f"<s>{inner}</s>"

    def code(self, text: str) -> str:
        return f"<code>{html.escape(text, quote=False)}</code>"

    def link(self, url: str, label: str) -> str:
        if not is_web_url(url):
            return label
        return f'<a href="{html.escape(url, quote=True)}">{label}</a>'

    def heading(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>"

    def code_block(self, text: str, language: str) -> str:
        body = html.escape(text, quote=False)
        if language:
            language = html.escape(language, quote=True)
            return f'<pre><code class="language-{language}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def table(self, text: str) -> str:
        return f"<pre>{html.escape(text, quote=False)}</pre>"

    def rule(self) -> str:
        return "──────────"

    def special(self, token: str) -> str:
        return html.escape(token, quote=False)


STYLE = TelegramHtml()


def split_html(markdown: str, limit: int = MESSAGE_LIMIT, allowed: Iterable[str] = ()) -> list[str]:
    """Telegram messages (HTML) of at most `limit` characters, each with balanced tags; only
    the `allowed` mentions (`@username`) may ping."""
    return split(markdown, TelegramHtml(allowed) if allowed else STYLE, limit)
