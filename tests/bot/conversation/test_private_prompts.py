"""Once any part of a run is private to one person, everything it sends is theirs alone: a
property of `decide` over every message the engine can send about a run (its outcomes, its
prompts and their continuations, what became of its decisions), and the rule that binds a
private run's decision to the message it was put on.

The secret stands for what the private read brought in: a model that obeys injected text
quotes it in whatever it says next (a question, a plan's arguments, a goal).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapters.base import (
    Actor,
    ConversationKey,
    InboundAction,
    InboundMessage,
    MessageRef,
    OutboundMessage,
)
from adapters.slack import ADDRESSING as SLACK_ADDRESSING
from agent.outcomes import (
    AwaitingAnswer,
    AwaitingApproval,
    Failed,
    Finished,
    Outcome,
    Plan,
    PlanStep,
    RunTrace,
)
from agent.protocols import RunContext
from agent.state import RunState
from bot.conversation.effects import (
    Answer,
    Claim,
    Claimed,
    Edit,
    Effect,
    Notify,
    Open,
    Prompt,
    Ran,
    Received,
    Send,
)
from bot.conversation.engine import Policy, decide
from bot.conversation.privately import bound, handed_over
from bot.runtime.decisions import Decision, Status
from bot.runtime.sessions import Session
from tests.bot.conversation.test_engine import decision

NOW = 1_000_000.0
ENTRY = "1700000000000-0"
SECRET = "Q3 payroll is 4.2M"
GROUP = ConversationKey(platform="slack", chat_id="C1", thread_id="1.0", team_id="T1")
ANA = Actor(platform="slack", user_id="U1", name="Ana")
BOB = Actor(platform="slack", user_id="U9", name="Bob")  # an approver
POLICY = Policy(now=NOW, approvers=frozenset({"U9"}), addressing=SLACK_ADDRESSING)


def run_state(private: bool = True, *, is_direct: bool = False) -> RunState:
    context = RunContext(
        conversation_id=GROUP.id,
        platform="slack",
        user_id="U1",
        chat_id="C1",
        is_direct=is_direct,
        user_name="Ana",
    )
    return RunState(
        context=context, objective="read #finance", private_to="U1" if private else None
    )


def outcomes(private: bool = True, *, is_direct: bool = False) -> dict[str, Outcome]:
    """Every kind of outcome a run comes to, each quoting what the private read brought in."""
    state = run_state(private, is_direct=is_direct)
    long = PlanStep(
        call_id="c1",
        tool="post_message",
        args={"channel": "#general", "text": f"{SECRET} " * 40},  # folded: shown in full above
        description=f"post {SECRET}",
        standing="digest",
    )
    uncertain = PlanStep(call_id="c0", tool="send_email", args={"body": SECRET}, description=SECRET)
    standing_trace = RunTrace(standing=["post_message"])
    return {
        "finished": Finished(answer=SECRET, state=state, trace=standing_trace),
        "failed": Failed(reason="error", message="Sorry.", state=state, trace=RunTrace()),
        "stopped": Failed(reason="stopped", message="", state=state, trace=RunTrace()),
        "question": AwaitingAnswer(
            question=f"Post “{SECRET}” to #general?",
            options=["yes", "no"],
            question_id="q",
            state=state,
            trace=RunTrace(),
        ),
        "connect link": AwaitingAnswer(
            question="Connect your tracker",
            options=[],
            question_id="q",
            state=state,
            trace=RunTrace(),
            link=("Connect", "https://tracker.example/authorize"),
        ),
        "approval": AwaitingApproval(
            plan=Plan(id="p", goal=f"share {SECRET}", steps=[long], uncertain=[]),
            state=state,
            trace=standing_trace,
        ),
        "approval with an uncertain step": AwaitingApproval(
            plan=Plan(id="p", goal=None, steps=[uncertain], uncertain=[uncertain]),
            state=state,
            trace=RunTrace(),
        ),
    }


def sent(effects: list[Effect]) -> list[OutboundMessage]:
    """Every message the effects post or edit."""
    return [e.message for e in effects if isinstance(e, Send | Answer | Prompt | Edit)]


def ran(outcome: Outcome, note: OutboundMessage | None = None) -> Ran:
    ask = InboundMessage(
        event_id="e1", conversation=GROUP, actor=ANA, text="read #finance", is_direct=False
    )
    return Ran(received=Received(entry_id=ENTRY, event=ask), outcome=outcome, note=note)


@pytest.mark.parametrize("kind", list(outcomes()))
def test_everything_a_private_run_sends_goes_to_its_requester_alone(kind: str) -> None:
    """Attack: after Ana's approved private read of #exec, the model quotes it in its next
    question, plan, long argument, goal or uncertain step: none of it may reach the thread."""
    outcome = outcomes()[kind]
    effects = decide(
        Session(status="running"), None, ran(outcome, OutboundMessage(text="n")), POLICY
    )
    messages = sent(effects)
    assert messages  # the run said something
    assert all(m.private_to == "U1" and m.audience == () for m in messages), messages
    for opened in (e for e in effects if isinstance(e, Open)):
        assert opened.private_to == "U1" and opened.requester_only  # approvers never saw it


@pytest.mark.parametrize("kind", list(outcomes(private=False)))
def test_a_run_nobody_made_private_still_speaks_to_the_chat(kind: str) -> None:
    """The rule changes nothing for a run that read nothing private."""
    effects = decide(Session(status="running"), None, ran(outcomes(private=False)[kind]), POLICY)
    assert not any(isinstance(e, Open) and e.private_to for e in effects)
    if kind != "connect link":  # a Connect link is the requester's anyway
        assert all(m.private_to is None for m in sent(effects))


def test_a_private_run_in_a_direct_chat_is_left_as_it_is() -> None:
    """A direct chat is private already: its messages are not turned into ephemerals."""
    for outcome in outcomes(is_direct=True).values():
        effects = decide(Session(status="running"), None, ran(outcome), POLICY)
        assert not any(isinstance(e, Open) and e.private_to for e in effects)
        assert all(m.audience == () for m in sent(effects))


def private_decision(kind: str = "approval", **fields: object) -> Decision:
    """A decision on a prompt only its requester saw (a Slack ephemeral)."""
    private: dict[str, object] = {
        "conversation_id": GROUP.id,
        "text": f"May I post {SECRET}?",
        "options": ["yes", "no"] if kind == "question" else [],
        "message_id": "eph1",
        "requester_only": True,
        "private_to": "U1",
    }
    return decision(kind, **{**private, **fields})


def waiting(kind: str = "approval") -> Session:
    status = "awaiting_approval" if kind == "approval" else "awaiting_answer"
    return Session(status=status, state=run_state(), decision_id="D1")  # type: ignore[arg-type]


def on_the_prompt(actor: Actor, choice: str, message_id: str = "eph1") -> InboundAction:
    return InboundAction(
        event_id="e2",
        conversation=GROUP,
        actor=actor,
        decision_id="D1",
        choice=choice,
        message=MessageRef(conversation=GROUP, message_id=message_id),
    )


def typed(text: str) -> InboundMessage:
    return InboundMessage(event_id="e3", conversation=GROUP, actor=ANA, text=text, is_direct=False)


CLAIMS: dict[str, tuple[str, InboundAction | InboundMessage, Status]] = {
    "approve pressed": ("approval", on_the_prompt(ANA, "approve"), "approved"),
    "reject pressed": ("approval", on_the_prompt(ANA, "reject"), "rejected"),
    "always pressed": ("approval", on_the_prompt(ANA, "always"), "approved"),
    "option pressed": ("question", on_the_prompt(ANA, "0"), "answered"),
    "yes typed": ("approval", typed("yes"), "approved"),
    "feedback typed": ("approval", typed("no, post it to #exec instead"), "rejected"),
    "answer typed": ("question", typed("yes"), "answered"),
    "cancelled": ("approval", typed("/cancel"), "cancelled"),
    "expired": ("approval", on_the_prompt(ANA, "approve"), "expired"),
}


@pytest.mark.parametrize("name", list(CLAIMS))
def test_what_became_of_a_private_decision_is_said_to_its_requester_alone(name: str) -> None:
    """The decided prompt (which quotes it), the decided line, the feedback note: all private."""
    kind, event, status = CLAIMS[name]
    decided = private_decision(kind, status=status, decided_by="<@U1>")
    claimed = Claimed(
        received=Received(entry_id=ENTRY, event=event), status=status, decided=decided
    )
    effects = decide(waiting(kind), private_decision(kind), claimed, POLICY)
    assert all(m.private_to == "U1" for m in sent(effects)), sent(effects)
    assert any(isinstance(e, Edit) for e in effects)  # the prompt loses its buttons, privately


def test_a_private_decision_is_decided_only_on_its_own_message() -> None:
    """Attack: Bob, an approver, presses Approve on a copy of the prompt's buttons, and Ana's
    own press on another message than the one it was put on is refused too."""
    session, decision = waiting(), private_decision()
    for press in (on_the_prompt(BOB, "approve"), on_the_prompt(ANA, "approve", "public1")):
        effects = decide(session, decision, Received(entry_id=ENTRY, event=press), POLICY)
        assert [type(e) for e in effects] == [Notify]
        assert not bound(decision, press)
    mine = on_the_prompt(ANA, "approve")
    effects = decide(session, decision, Received(entry_id=ENTRY, event=mine), POLICY)
    assert [type(e) for e in effects] == [Claim]


def test_a_press_in_the_requesters_private_chat_is_handed_to_the_shared_chat() -> None:
    """Telegram puts the private prompt in the person's own chat: the press arrives there,
    is bound (their chat), and belongs to the group's conversation; nobody else's is."""
    private = ConversationKey(platform="slack", chat_id="U1")
    decision = private_decision()
    press = replace(
        on_the_prompt(ANA, "approve"),
        conversation=private,
        message=MessageRef(conversation=private, message_id="77"),
        is_direct=True,
    )
    assert handed_over(decision, press) and bound(decision, press)
    assert not handed_over(decision, replace(press, actor=BOB))
    assert not handed_over(private_decision(private_to=None), press)
    there = replace(press, conversation=GROUP, is_direct=False)
    effects = decide(waiting(), decision, Received(entry_id=ENTRY, event=there), POLICY)
    assert [type(e) for e in effects] == [Claim]
