"""The model's Markdown as Telegram HTML (the one parse mode whose escaping is simple)."""

from __future__ import annotations

import html

from adapters.markdown import is_web_url, split

MESSAGE_LIMIT = 4096


class TelegramHtml:
    """Telegram's HTML subset: b, i, s, code, pre, a, blockquote."""

    def text(self, text: str) -> str:
        return html.escape(text, quote=False)

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


def split_html(markdown: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Telegram messages (HTML) of at most `limit` characters, each with balanced tags."""
    return split(markdown, STYLE, limit)
