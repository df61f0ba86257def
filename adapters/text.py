"""Sentences both chat adapters say at the edge, before anything reaches the agent."""

from __future__ import annotations

TOO_LONG = (
    "That message is too long for me ({length:,} characters; my limit is {limit:,}). "
    "Could you shorten it or split it up?"
)


def too_long(length: int, limit: int) -> str:
    """The polite answer to a message over the length limit."""
    return TOO_LONG.format(length=length, limit=limit)
