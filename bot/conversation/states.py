"""The session's states and the moves between them, as data beside `decide` (engine.py)::

    idle ──run──▶ running ──ask───────────▶ awaiting_answer ───┐
                   │  ▲  └──seek_approval──▶ awaiting_approval ─┤ run (resumed)
                   │  └─────────────────────────────────────────┘
                   └──settle──▶ idle ◀──settle── (either awaiting state: cancelled, expired)

`running` may run again: a replay after a crash resumes or restarts the run it stored. The
executor makes a move when it carries out the effect that calls for it (`Run` / `Resume`,
`Open`, `Settle`); a move the table does not allow raises `BadTransition` instead of storing
a session no rule expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from bot.runtime.sessions import Session, Status

Move = Literal["run", "ask", "seek_approval", "settle"]

TRANSITIONS: Mapping[Status, Mapping[Move, Status]] = {
    "idle": {"run": "running"},
    "running": {
        "run": "running",
        "ask": "awaiting_answer",
        "seek_approval": "awaiting_approval",
        "settle": "idle",
    },
    "awaiting_answer": {"run": "running", "settle": "idle"},
    "awaiting_approval": {"run": "running", "settle": "idle"},
}


class BadTransition(Exception):
    """A move the table does not allow from the session's state: a bug in the rules."""

    def __init__(self, status: Status, move: Move) -> None:
        super().__init__(f"no move {move!r} from {status!r}")
        self.status = status
        self.move = move


def after(status: Status, move: Move) -> Status:
    """The state `move` leads to from `status`; BadTransition if the table has no such move."""
    try:
        return TRANSITIONS[status][move]
    except KeyError:
        raise BadTransition(status, move) from None


def advance(session: Session, move: Move, decision_id: str | None = None) -> None:
    """Make `move` on `session`, with the fields that go with it: a decision is the
    session's only while it waits on one (`decision_id`, for ask and seek_approval), and
    settling also forgets how a decision was being resolved."""
    session.status = after(session.status, move)
    session.decision_id = decision_id if move in ("ask", "seek_approval") else None
    if move == "settle":
        session.resolving = None
