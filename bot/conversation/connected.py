"""A person finished connecting an account (`kind="connected"`, from /oauth/callback).

It answers the question the run waits on — the Connect prompt it was made for, nothing
else — and the run goes on by itself, with the account now connected. Arriving when that
question no longer waits (answered, cancelled, expired), it only says the account is
connected, to that person alone.

The event comes from the person typing the one-time code the sign-in page showed them
(`as_code`): that binds the account to the person in the chat, not to whoever opened the
link (bot/features/connections/held.py).
"""

from __future__ import annotations

import re

from adapters.base import InboundMessage, OutboundMessage
from adapters.traits import mention
from bot.conversation.effects import Claim, Effect, Send
from bot.conversation.texts import (
    CONNECTED_LATER,
)
from bot.runtime.decisions import Decision
from bot.runtime.sessions import Session

_CODE = re.compile(r"\s*(\d{3})[\s-]?(\d{3})\s*")


def as_code(text: str) -> str | None:
    """The code a message consists of ("123 456", "123-456", "123456"), or None."""
    found = _CODE.fullmatch(text)
    return found.group(1) + found.group(2) if found else None


def connected(
    session: Session, pending: Decision | None, event: InboundMessage, now: float
) -> list[Effect]:
    state = session.state
    waiting = state.pending_question if state is not None else None
    live = (
        pending is not None
        and pending.id == session.decision_id
        and pending.status == "pending"
        and not pending.expired(now)
    )
    if (
        live
        and pending is not None
        and waiting is not None
        and waiting.id == event.args
        and pending.requester_id == event.actor.user_id
    ):
        by = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
        return [Claim(decision_id=pending.id, status="answered", by=by)]
    said = OutboundMessage(text=CONNECTED_LATER, private_to=event.actor.user_id)
    return [Send(message=said, slot="connected")]
