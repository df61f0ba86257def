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

import json

import redis.asyncio as aioredis

from adapters.base import ConversationKey, MessageRef
from bot.runtime.holding import PendingWrites

IN_FLIGHT = b"in-flight"
PARKED = b"parked"  # waiting in the undelivered set
FAILED = b"failed"  # refused for good
DONE = b"done"  # an edit that went through
GIVEN_UP = b"given-up"  # the entry was dead-lettered and its user told
MARKERS = (PARKED, FAILED, DONE, GIVEN_UP)


def sent_ref(conversation: ConversationKey, stored: bytes | str | None) -> MessageRef | None:
    """The ref a key's first send recorded; None when it is unknown (or nothing was posted)."""
    if isinstance(stored, str):
        stored = stored.encode()
    if stored is None or stored.startswith(IN_FLIGHT) or stored in MARKERS:
        return None
    try:
        message_id = json.loads(stored)
    except ValueError:
        return None
    if isinstance(message_id, dict):  # a streamed answer's half message, not a sent one
        return None
    return MessageRef(conversation=conversation, message_id=str(message_id))


async def record_sent(
    redis: aioredis.Redis, key: str, message_id: str, ttl_ms: int, later: PendingWrites | None
) -> None:
    """Record the message a key delivered now, or with the session save `later` waits for."""
    value = json.dumps(message_id)
    if later is None:
        await redis.set(key, value, px=ttl_ms)
    else:
        later.record(key, value, ttl_ms)
