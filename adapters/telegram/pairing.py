"""Pairing, as the adapter sees it: a sender off the allowlist may have been paired (asked of
the bot's store), and in pairing mode one who was not is handed over with their code."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Protocol

from adapters.base import Inbound, InboundMessage

log = logging.getLogger(__name__)


class Pairing(Protocol):
    """Who is paired, and the code a person off the allowlist is given (the bot's Redis)."""

    async def admitted(self, user_id: str) -> bool: ...

    async def code_for(self, user_id: str, name: str) -> str: ...


async def paired_after_all(pairing: Pairing | None, event: Inbound | None) -> bool:
    """Whether a sender off the allowlist was paired (Redis away: not, until it is back)."""
    if pairing is None or not isinstance(event, InboundMessage) or event.kind != "not_allowed":
        return False
    try:
        return await pairing.admitted(event.actor.user_id)
    except Exception as exc:
        log.warning("pairing not checked (%s); the sender stays out", type(exc).__name__)
        return False


async def pairing_offer(pairing: Pairing | None, event: InboundMessage) -> InboundMessage:
    """A sender off the allowlist, in pairing mode: their code in a private chat; in a group
    none (the engine tells them to write privately)."""
    if pairing is None:
        return event
    code = ""
    if event.is_direct:
        try:
            code = await pairing.code_for(event.actor.user_id, event.actor.name)
        except Exception as exc:
            log.warning("no pairing code given (%s)", type(exc).__name__)
            return event
    return replace(event, kind="pairing", args=code)
