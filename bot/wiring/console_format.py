"""The model's Markdown as terminal text, for `parley console`.

Parsed once by `adapters.markdown` like the platforms' replies: `**bold**` and headings are
bold (ANSI) on a terminal and plain elsewhere, lists get bullets, code blocks are indented,
links show their address. While an answer streams, only its complete lines are rendered, and
only while that rendering extends what is already printed (`Printed`), so text once printed
is never printed again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from adapters.markdown import render

BOLD, ITALIC, PLAIN = "\033[1m", "\033[3m", "\033[0m"


@dataclass(frozen=True)
class TerminalText:
    """A `adapters.markdown.Style` for a terminal (`ansi`) or a pipe (plain text)."""

    ansi: bool = False

    def _wrap(self, start: str, inner: str) -> str:
        return f"{start}{inner}{PLAIN}" if self.ansi and inner else inner

    def text(self, text: str) -> str:
        return text

    def bold(self, inner: str) -> str:
        return self._wrap(BOLD, inner)

    def italic(self, inner: str) -> str:
        return self._wrap(ITALIC, inner)

    def strike(self, inner: str) -> str:
        return inner

    def code(self, text: str) -> str:
        return text

    def link(self, url: str, label: str) -> str:
        return label if not url or url in (label, f"mailto:{label}") else f"{label} ({url})"

    def heading(self, inner: str) -> str:
        return self._wrap(BOLD, inner)

    def quote(self, inner: str) -> str:
        return "\n".join(f"│ {line}" for line in inner.split("\n"))

    def code_block(self, text: str, language: str) -> str:
        return "\n".join(f"    {line}" if line else "" for line in text.split("\n"))

    def table(self, text: str) -> str:
        return text

    def rule(self) -> str:
        return "──────────"

    def special(self, token: str) -> str:
        return token


def terminal_text(markdown: str, *, ansi: bool = False) -> str:
    return render(markdown, TerminalText(ansi=ansi))


@dataclass(kw_only=True)
class Printed:
    """What of a streamed answer has been printed, as rendered terminal text."""

    ansi: bool = False
    shown: str = ""

    def more(self, markdown: str) -> str:
        """What to print now of the answer so far, beyond what is printed: its complete
        lines rendered, and the words of the line being written while they are plain prose
        (markup there may still change how they look). Nothing while the rendering would
        change printed text, or while a table is still growing (its columns align at the end).
        """
        lines = markdown.split("\n")
        writing = lines.pop()
        if lines and lines[-1].lstrip().startswith("|"):
            while lines and lines[-1].lstrip().startswith("|"):
                lines.pop()
            writing = ""
        words = _plain_words(writing)
        source = "\n".join([*lines, words] if words else lines)
        return self._extend(terminal_text(source, ansi=self.ansi)) if source else ""

    def rest(self, markdown: str) -> str | None:
        """What to print to end the answer; None if the whole answer must be printed anew
        (its rendering no longer begins with what was printed)."""
        final = terminal_text(markdown, ansi=self.ansi)
        if not final.startswith(self.shown):
            return None
        return self._extend(final)

    def _extend(self, rendered: str) -> str:
        if len(rendered) <= len(self.shown) or not rendered.startswith(self.shown):
            return ""
        new, self.shown = rendered[len(self.shown) :], rendered
        return new


_MARKUP = re.compile(r"[*_`\[\]~<>!&\\|]")


def _plain_words(line: str) -> str:
    """The whole words at the start of an unfinished line that cannot turn into markup."""
    if not line or line[0] in " \t#>-+*=|`~" or line[0].isdigit():
        return ""  # a block may begin here: a heading, quote, list, table or code
    found = _MARKUP.search(line)
    head = line if found is None else line[: found.start()]
    return head[: head.rfind(" ")].rstrip() if " " in head else ""
