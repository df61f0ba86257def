"""The rule for a finished sign-in (`kind="connected"`): it answers only the Connect question
it was made for, asked of the person who signed in; otherwise it only tells that person."""

from __future__ import annotations

import pytest

from adapters.base import Actor, InboundMessage
from agent.deferred import PendingQuestion
from agent.protocols import RunContext
from agent.state import RunState
from bot.conversation.connected import CONNECTED_LATER, connected
from bot.conversation.effects import Claim, Send
from bot.runtime.decisions import Decision
from bot.runtime.sessions import Session
from tests.bot.recording import dm

CHAT = dm("42")
NOW = 1000.0


def waiting(question_id: str = "q1") -> tuple[Session, Decision]:
    context = RunContext(conversation_id=CHAT.id, platform="telegram", user_id="42", chat_id="42")
    state = RunState(context=context, objective="who am I?")
    state.pending_question = PendingQuestion(id=question_id, tool_use_id="t1", question="Connect")
    decision = Decision(
        id="d1",
        kind="question",
        conversation_id=CHAT.id,
        requester_id="42",
        text="Connect",
        created_at=NOW - 10,
        expires_at=NOW + 10,
    )
    return Session(status="awaiting_answer", state=state, decision_id="d1"), decision


def signed_in(user: str = "42", question: str = "q1") -> InboundMessage:
    return InboundMessage(
        event_id="connected:q1",
        conversation=CHAT,
        actor=Actor(platform="telegram", user_id=user),
        text="I connected my tracker account.",
        is_direct=True,
        kind="connected",
        args=question,
    )


def test_it_answers_the_connect_question_it_was_made_for() -> None:
    session, decision = waiting()
    (effect,) = connected(session, decision, signed_in(), NOW)
    assert isinstance(effect, Claim) and effect.decision_id == "d1"
    assert effect.status == "answered"


@pytest.mark.parametrize(
    ("event", "question", "expires"),
    [
        (signed_in(question="q-other"), "q1", NOW + 10),  # another question waits now
        (signed_in(user="77"), "q1", NOW + 10),  # not the requester
        (signed_in(), "q1", NOW - 1),  # expired
    ],
)
def test_otherwise_it_only_tells_the_person(
    event: InboundMessage, question: str, expires: float
) -> None:
    session, decision = waiting(question)
    decision = decision.model_copy(update={"expires_at": expires})
    (effect,) = connected(session, decision, event, NOW)
    assert isinstance(effect, Send) and effect.message.text == CONNECTED_LATER
    assert effect.message.private_to == event.actor.user_id


def test_an_idle_conversation_is_only_told() -> None:
    (effect,) = connected(Session(), None, signed_in(), NOW)
    assert isinstance(effect, Send) and effect.message.private_to == "42"
