"""Untrusted text inside the frames the model reads it in.

Thread messages, quoted and forwarded messages, files, summaries and the objective reach the
model between tags (`<thread>…</thread>`). Such text must not be able to close its frame or
open another one, nor speak as Parley: every frame tag inside it is defused (its `<` becomes
`‹`), each message of a transcript starts a line of its own while its later lines are
indented, and a person whose name reads like Parley's label is marked as a person.
"""

from __future__ import annotations

import json
import re
import unicodedata

# Every tag Parley frames text in, here and in agent/observations.py.
FRAME_TAGS = (
    "thread",
    "quoted_message",
    "forwarded_message",
    "file",
    "transcript",
    "earlier_summary",
    "summary",
    "objective",
    "remembered",
    "tool_output",
    "context",
)
PARLEY = "you (Parley)"  # how Parley's own messages are labelled in a transcript
NOT_PARLEY = " (a person, not you)"

_TAG = re.compile(r"<(?=\s*/?\s*(?:" + "|".join(FRAME_TAGS) + r")\b)", re.IGNORECASE)
INDENT = "    "


def defuse(text: str) -> str:
    """`text` with no frame tag left in it: `</thread>` reads as `‹/thread>`."""
    return _TAG.sub("‹", text)


def frame(tag: str, body: str, **attributes: str) -> str:
    """`body` between `<tag …>` and `</tag>`, unable to end the frame early."""
    shown = "".join(
        f" {name}={json.dumps(defuse(one_line(value)), ensure_ascii=False)}"
        for name, value in attributes.items()
    )
    return f"<{tag}{shown}>\n{defuse(body)}\n</{tag}>"


def one_line(text: str) -> str:
    return " ".join(text.split())


def speaker(author: str, from_bot: bool) -> str:
    """How a transcript names who wrote a message: Parley as PARLEY, anyone else by a name
    that cannot pass for it."""
    if from_bot:
        return PARLEY
    name = defuse(one_line(author)).replace("[", "(").replace("]", ")") or "someone"
    letters = "".join(c for c in unicodedata.normalize("NFKC", name).casefold() if c.isalpha())
    if "parley" in letters or letters in ("you", "yourself", "assistant"):
        name += NOT_PARLEY
    return name


def said(who: str, text: str) -> str:
    """One message of a transcript: `[who]: text`, its later lines indented."""
    return f"[{who}]: " + indented(text)


def indented(text: str) -> str:
    """A message's text with every line after the first indented, so that no line of it
    can pass for a message of its own (splitlines: line separators count too)."""
    return ("\n" + INDENT).join(text.strip().splitlines())
