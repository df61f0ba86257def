"""What a server's `input_required` result becomes, and what the answers become: forms asked
one field at a time, the server's state passed back, secrets and links refused."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
import pytest

from agent.mcp.elicitation import SECRET_REFUSED, URL_REFUSED, answered, question
from agent.tools import InputRequired, ToolError


def form(message: str, properties: dict[str, Any], **extra: Any) -> mt.ElicitRequest:
    schema = {"type": "object", "properties": properties, **extra}
    return mt.ElicitRequest(
        params=mt.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def needs(state: str | None = "opaque", **requests: mt.ElicitRequest) -> mt.InputRequiredResult:
    return mt.InputRequiredResult(input_requests=dict(requests), request_state=state)


def answer(asked: InputRequired, reply: str) -> Any:
    return answered({**asked.resume, "answer": reply})


def test_a_form_is_asked_field_by_field_and_the_state_goes_back() -> None:
    first = question(
        "crm",
        needs(
            q1=form(
                "Book the room",
                {"seats": {"type": "integer", "title": "Seats"}, "note": {"type": "string"}},
            )
        ),
    )
    assert first.question.startswith("*crm* (a connected tool, not Parley) asks: Book the room")
    assert first.options == ["Decline"] and "Seats" in first.question
    with pytest.raises(InputRequired) as again:  # not a whole number: asked again
        answer(first, "2.5")
    assert again.value.question.startswith("That answer does not fit")
    with pytest.raises(InputRequired) as second:
        answer(again.value, "4")
    responses, state = answer(second.value, "by the window")
    assert state == "opaque"
    assert responses == {
        "q1": mt.ElicitResult(action="accept", content={"seats": 4, "note": "by the window"})
    }


def test_a_decline_skips_the_rest_of_that_request_only() -> None:
    asked = question(
        "crm",
        needs(
            a=form("First", {"x": {"type": "boolean"}, "y": {"type": "boolean"}}),
            b=form("Second", {"colour": {"type": "string", "enum": ["red", "blue"]}}),
        ),
    )
    assert asked.options == ["Yes", "No", "Decline"]
    with pytest.raises(InputRequired) as next_one:
        answer(asked, "Decline")
    assert next_one.value.options == ["red", "blue", "Decline"]
    responses, _ = answer(next_one.value, "BLUE")
    assert responses == {
        "a": mt.ElicitResult(action="decline"),
        "b": mt.ElicitResult(action="accept", content={"colour": "blue"}),
    }


@pytest.mark.parametrize(
    "properties",
    [
        {"password": {"type": "string"}},
        {"value": {"type": "string", "title": "Your API key"}},
        {"code": {"type": "string", "format": "password"}},
        {"x": {"type": "string", "description": "the one-time token we sent you"}},
    ],
)
def test_a_request_for_a_secret_is_refused(properties: dict[str, Any]) -> None:
    with pytest.raises(ToolError) as refused:
        question("crm", needs(q=form("Sign in", properties)))
    field = next(iter(properties))
    assert str(refused.value) == SECRET_REFUSED.format(server="crm", field=field)


@pytest.mark.parametrize(
    ("message", "properties"),
    [
        ("Enter your password to continue.", {"answer": {"type": "string"}}),
        ("Reply with the verification code we texted you", {"reply": {"type": "string"}}),
        ("Type your login code", {"value": {"type": "integer"}}),
        ("What is your pwd for the VPN?", {"text": {"type": "string"}}),
    ],
)
def test_a_secret_asked_for_in_the_message_under_an_innocent_field_is_refused(
    message: str, properties: dict[str, Any]
) -> None:
    # A hostile server hides the request in its message; the typed reply would be the secret.
    with pytest.raises(ToolError) as refused:
        question("crm", needs(q=form(message, properties)))
    field = next(iter(properties))
    assert str(refused.value) == SECRET_REFUSED.format(server="crm", field=field)


def test_a_yes_no_question_that_mentions_a_password_is_still_asked() -> None:
    # Buttons cannot carry a secret: "Reset your password?" is an ordinary question.
    asked = question("crm", needs(q=form("Reset your password now?", {"ok": {"type": "boolean"}})))
    assert asked.options == ["Yes", "No", "Decline"]
    assert asked.question.startswith("*crm* (a connected tool, not Parley) asks: Reset")


def test_a_link_to_open_is_refused() -> None:
    link = mt.ElicitRequest(
        params=mt.ElicitRequestURLParams(
            message="Pay here", url="https://pay.example/x", elicitation_id="e1"
        )
    )
    with pytest.raises(ToolError) as refused:
        question("crm", needs(q=link))
    assert str(refused.value) == URL_REFUSED.format(server="crm")


def test_a_long_question_is_cut() -> None:
    asked = question("crm", needs(q=form("x" * 5000, {"ok": {"type": "boolean"}})))
    assert len(asked.question) < 700  # cut, so a server cannot flood the chat
