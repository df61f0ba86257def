"""The inbox's stored form: every field of an event comes back, a mistyped entry is refused,
and entries queued by an earlier Parley (before a restart onto this one) still read."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from adapters.base import (
    Actor,
    Attachment,
    ContextMessage,
    ConversationKey,
    InboundAction,
    InboundMessage,
    MessageRef,
)
from bot.runtime.inbox import decode, decode_entry, encode

CHANNEL = ConversationKey(platform="slack", chat_id="C1", thread_id="171.5", team_id="T1")
ACTOR = Actor(platform="slack", user_id="U1", name="Ana — ü", team_id="T1", groups=("S1", "S2"))

MESSAGE = InboundMessage(
    event_id="Ev1",
    conversation=CHANNEL,
    actor=ACTOR,
    text="hello “world” 👋",
    is_direct=False,
    command="memories",
    args="all",
    message_id="171.6",
    mentioned=False,
    attachments=(
        Attachment(ref="https://files/x.png", name="x.png", mime_type="image/png", size=12),
        Attachment(ref="F1", speech=True, duration=1.5, quoted=True),
    ),
    context=(ContextMessage(author="Bo", text="earlier", from_bot=True, at=170.0),),
    kind="too_long",
    length=9000,
    reply_url="https://hooks.slack.test/r",
    forwarded_from="Cy",
)
ACTION = InboundAction(
    event_id="Ev2",
    conversation=CHANNEL,
    actor=ACTOR,
    decision_id="d1",
    choice="approve",
    message=MessageRef(conversation=CHANNEL, message_id="171.7"),
    callback_id="cb",
    is_direct=True,
)

# As the hand-written codec before this one stored them (json.dumps of asdict), so entries
# waiting in the stream across an upgrade are still handled.
EARLIER_MESSAGE = (
    '{"kind": "message", "event": {"event_id": "1:2", "conversation": {"platform": "telegram",'
    ' "chat_id": "42", "thread_id": null, "team_id": null}, "actor": {"platform": "telegram",'
    ' "user_id": "42", "name": "Ana", "team_id": null, "groups": []}, "text": "hi",'
    ' "is_direct": true, "command": null, "args": "", "message_id": "2", "mentioned": true,'
    ' "attachments": [], "context": [], "kind": "text", "length": 0, "reply_url": null,'
    ' "forwarded_from": null}}'
)
EARLIER_ACTION = (
    '{"kind": "action", "event": {"event_id": "cb:9", "conversation": {"platform": "telegram",'
    ' "chat_id": "42", "thread_id": null, "team_id": null}, "actor": {"platform": "telegram",'
    ' "user_id": "42", "name": "Ana", "team_id": null, "groups": []}, "decision_id": "d9",'
    ' "choice": "reject", "message": {"conversation": {"platform": "telegram", "chat_id": "42",'
    ' "thread_id": null, "team_id": null}, "message_id": "7"}, "callback_id": "cb",'
    ' "is_direct": true}}'
)


@pytest.mark.parametrize("event", [MESSAGE, ACTION], ids=["message", "action"])
def test_every_field_comes_back(event: InboundMessage | InboundAction) -> None:
    stored = encode(event)
    assert decode(stored) == event
    assert decode(stored.decode()) == event
    assert "👋".encode() in stored or isinstance(event, InboundAction)  # UTF-8, not \u escapes


def test_entries_an_earlier_parley_queued_still_read() -> None:
    message = decode(EARLIER_MESSAGE)
    assert isinstance(message, InboundMessage)
    assert message.conversation.id == "telegram:-:42:-" and message.actor.groups == ()
    action = decode(EARLIER_ACTION)
    assert isinstance(action, InboundAction)
    assert action.message == MessageRef(conversation=action.conversation, message_id="7")
    assert decode_entry({b"event": EARLIER_MESSAGE.encode()}) == (message, "telegram:-:42:-")


def _mistyped(path: tuple[str, ...], value: object) -> str:
    data = json.loads(EARLIER_MESSAGE)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    "payload",
    [
        "{not json",
        "[]",
        '{"kind": "message"}',
        '{"kind": "reaction", "event": {}}',
        _mistyped(("event", "event_id"), 12),  # a number where an id belongs
        _mistyped(("event", "actor", "user_id"), None),
        _mistyped(("event", "conversation", "thread_id"), 1700000000.5),
        _mistyped(("event", "conversation", "platform"), "irc"),
        _mistyped(("event", "is_direct"), "true"),  # strict: no coercion of what was stored
        _mistyped(("event", "length"), "12"),
        _mistyped(("event", "attachments"), [{"name": "no ref"}]),
        _mistyped(("kind",), "action"),  # a message's fields under an action's kind
    ],
)
def test_a_mistyped_entry_is_refused(payload: str) -> None:
    with pytest.raises(ValidationError):
        decode_entry({b"event": payload.encode()})
