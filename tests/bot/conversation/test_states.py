"""The session's transition table (`bot/conversation/states.py`), walked: every move it
allows is one some rule of `decide` makes, and every move it does not allow raises."""

from __future__ import annotations

import typing

import pytest

from adapters.base import InboundAction, InboundMessage
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Finished, Plan, PlanStep
from bot.conversation.effects import (
    Admitted,
    Claimed,
    Effect,
    Event,
    Open,
    Ran,
    Received,
    Resume,
    Run,
    Settle,
)
from bot.conversation.engine import decide
from bot.conversation.states import TRANSITIONS, BadTransition, Move, advance, after
from bot.runtime.decisions import Decision
from bot.runtime.decisions import Status as DecisionStatus
from bot.runtime.sessions import Resolution, Session, Status
from tests.bot.conversation.test_engine import (
    ENTRY,
    NOW,
    PENDING,
    POLICY,
    SESSIONS,
    decided,
    press,
    say,
    state,
    trace,
)

STATUSES: tuple[Status, ...] = typing.get_args(Status)
MOVES: tuple[Move, ...] = typing.get_args(Move)


def received(event: object) -> Received:
    return Received(entry_id=ENTRY, event=event)  # type: ignore[arg-type]


def ran(outcome: object) -> Ran:
    return Ran(received=received(say("requester")), outcome=outcome)  # type: ignore[arg-type]


def claimed(
    session: str, pending: str, event: InboundMessage | InboundAction, status: DecisionStatus
) -> tuple[Session, Decision | None, Event]:
    """A claim the requester won on the session's decision."""
    decision = PENDING[pending]
    assert decision is not None
    won = decided(decision.kind, status)
    return (
        SESSIONS[session],
        decision,
        Claimed(received=received(event), status=status, decided=won),
    )


STEP = PlanStep(call_id="c1", tool="send_email", args={"to": "bo"}, description="Email Bo")
RUNNING = Session(status="running", state=state())
CRASHED_RESUMING = Session(
    status="running", state=state(), resolving=Resolution(entry_id=ENTRY, answer="blue")
)

# (session, the decision the event concerns, event): the rules that move the session.
SCENES: list[tuple[Session, Decision | None, Event]] = [
    (SESSIONS["idle"], None, Admitted(received=received(say("requester")))),
    (RUNNING, None, ran(Finished(answer="Done.", state=state(), trace=trace()))),
    (
        RUNNING,
        None,
        ran(
            AwaitingAnswer(
                question="Which?", options=[], question_id="q", state=state(), trace=trace()
            )
        ),
    ),
    (
        RUNNING,
        None,
        ran(
            AwaitingApproval(
                plan=Plan(id="p", goal=None, steps=[STEP]), state=state(), trace=trace()
            )
        ),
    ),
    (CRASHED_RESUMING, None, received(say("requester", "blue"))),  # a replay resumes
    claimed("awaiting_answer", "question", say("requester", "blue"), "answered"),
    claimed("awaiting_approval", "approval", press("requester", "approve"), "approved"),
    claimed("awaiting_answer", "question", say("requester", command="cancel"), "cancelled"),
    claimed("awaiting_approval", "expired", press("requester", "approve"), "expired"),
]


def moves_of(effects: list[Effect]) -> list[Move]:
    """The moves the executor makes carrying these effects out."""
    moves: list[Move] = []
    for effect in effects:
        if isinstance(effect, Run | Resume):
            moves.append("run")
        elif isinstance(effect, Open):
            moves.append("ask" if effect.kind == "question" else "seek_approval")
        elif isinstance(effect, Settle):
            moves.append("settle")
    return moves


def test_every_move_the_table_allows_is_one_the_rules_make() -> None:
    taken: set[tuple[Status, Move]] = set()
    for session, pending, event in SCENES:
        status = session.status
        for move in moves_of(decide(session, pending, event, POLICY)):
            taken.add((status, move))
            status = after(status, move)  # raises if a rule makes a move the table forbids
    allowed = {(status, move) for status, moves in TRANSITIONS.items() for move in moves}
    assert taken == allowed


@pytest.mark.parametrize(
    ("status", "move"),
    [(s, m) for s in STATUSES for m in MOVES if m not in TRANSITIONS[s]],
)
def test_a_move_the_table_does_not_allow_raises(status: Status, move: Move) -> None:
    session = Session(status=status, decision_id="D1" if status.startswith("awaiting") else None)
    with pytest.raises(BadTransition):
        advance(session, move)
    assert session.status == status  # nothing changed


def test_every_state_is_in_the_table() -> None:
    assert set(TRANSITIONS) == set(STATUSES)


def test_a_move_carries_the_fields_that_go_with_it() -> None:
    session = Session(status="running", state=state())
    advance(session, "seek_approval", decision_id="D1")
    assert (session.status, session.decision_id) == ("awaiting_approval", "D1")
    session.resolving = Resolution(entry_id=ENTRY, approved=True)
    advance(session, "run")
    assert (session.status, session.decision_id) == ("running", None)
    assert session.resolving is not None  # a resumed run's replay needs it until it is over
    advance(session, "settle")
    assert (session.status, session.decision_id, session.resolving) == ("idle", None, None)
    assert NOW  # the table reads no clock
