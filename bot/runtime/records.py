"""What an outbox key holds, read and written by the outbox and by a streamed answer alike::

    in-flight[:<claim>]   a send or finish started (a replay posts nothing: never twice)
    parked | failed       waiting for redelivery | refused for good
    given-up              the entry was given up (its user told so): a late run posts nothing
    done                  an edit that went through
    "<id>" (JSON)         delivered: the message's id
    {"live": "<id>"}      a streamed answer's half message, to be finished or replaced

A delivered id can wait in the lock holder's pending writes for its next session save
(`later`), so that both share one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from adapters.base import ConversationKey, MessageRef
from bot.runtime.codec import Codec
from bot.runtime.holding import PendingWrites

IN_FLIGHT = b"in-flight"
PARKED = b"parked"  # waiting in the undelivered set
FAILED = b"failed"  # refused for good
DONE = b"done"  # an edit that went through
GIVEN_UP = b"given-up"  # the entry was dead-lettered and its user told
MARKERS = (PARKED, FAILED, DONE, GIVEN_UP)


@dataclass(frozen=True)
class Live:
    """A streamed answer's half message, to be finished or replaced."""

    live: str


# A delivered id is text (a platform's number, in records written before ids were text).
RECORD: Codec[str | int | Live] = Codec(str | int | Live)


def sent_value(message_id: str) -> bytes:
    """What a key holds once `message_id` delivered it."""
    return RECORD.encode(message_id)


def live_value(message_id: str) -> bytes:
    """What a key holds while `message_id` is a streamed answer's half message."""
    return RECORD.encode(Live(message_id))


def delivered(stored: bytes | str) -> str | Live:
    """The delivered id or half message a key holds (not a marker); ValueError if neither."""
    found = RECORD.decode(stored)
    return found if isinstance(found, Live) else str(found)


def sent_ref(conversation: ConversationKey, stored: bytes | str | None) -> MessageRef | None:
    """The ref a key's first send recorded; None when it is unknown (or nothing was posted)."""
    if isinstance(stored, str):
        stored = stored.encode()
    if stored is None or stored.startswith(IN_FLIGHT) or stored in MARKERS:
        return None
    try:
        message_id = delivered(stored)
    except ValueError:
        return None
    if isinstance(message_id, Live):  # a streamed answer's half message, not a sent one
        return None
    return MessageRef(conversation=conversation, message_id=message_id)


async def record_sent(
    redis: aioredis.Redis, key: str, message_id: str, ttl_ms: int, later: PendingWrites | None
) -> None:
    """Record the message a key delivered now, or with the session save `later` waits for."""
    value = sent_value(message_id)
    if later is None:
        await redis.set(key, value, px=ttl_ms)
    else:
        later.record(key, value, ttl_ms)
