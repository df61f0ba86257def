"""The inbox: platform events, deduplicated by their platform id, queued on a Redis Stream.

Adapters hand every event to `Inbox.submit`, which returns as soon as the event is stored,
so a platform is acknowledged at once (Slack wants an answer within 3 s) and only then. The
dedup mark and the stream entry are written by one script, so either both exist or neither:
an event whose write failed comes back from its platform and is not taken for a duplicate.
When Redis cannot take the event, `submit` raises `HandoverFailed`.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Literal

import redis.asyncio as aioredis
from pydantic import Field, TypeAdapter
from redis.exceptions import RedisError
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from adapters.base import (
    HandoverFailed,
    Inbound,
    InboundAction,
    InboundMessage,
)
from bot.ops import metrics
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

# Far above any backlog a healthy deployment has; trimming is approximate and only drops the
# oldest entries, which are long acknowledged by then.
STREAM_MAXLEN = 100_000

# KEYS: dedup mark, inbox stream. ARGV: mark ttl (ms), maxlen, event, queued_at.
_SUBMIT = """
if not redis.call('set', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
redis.call('xadd', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'event', ARGV[3], 'queued_at', ARGV[4])
return 1
"""


class _MessageEntry(TypedDict):
    kind: Literal["message"]
    event: InboundMessage


class _ActionEntry(TypedDict):
    kind: Literal["action"]
    event: InboundAction


# The stored form: {"kind": "message" | "action", "event": {the dataclass's fields}}.
_ENTRY: TypeAdapter[_MessageEntry | _ActionEntry] = TypeAdapter(
    Annotated[_MessageEntry | _ActionEntry, Field(discriminator="kind")]
)


def encode(event: Inbound) -> bytes:
    entry: _MessageEntry | _ActionEntry = (
        {"kind": "action", "event": event}
        if isinstance(event, InboundAction)
        else {"kind": "message", "event": event}
    )
    return _ENTRY.dump_json(entry)


def decode(payload: str | bytes) -> Inbound:
    """The event of a stored entry; raises `ValidationError` for anything else, a field of
    the wrong type included."""
    return _ENTRY.validate_json(payload, strict=True)["event"]  # "true" is no bool


def decode_entry(fields: dict[bytes, bytes]) -> tuple[Inbound, str]:
    """A stream entry's event and conversation id; raises for anything a worker could not
    handle."""
    event = decode(fields[b"event"])
    return event, event.conversation.id


def queued_at_of(fields: dict[bytes, bytes]) -> float:
    """When a stream entry was queued (0 if unknown: only the lag metric needs it)."""
    try:
        return float(fields.get(b"queued_at") or 0)
    except ValueError:
        return 0.0


class Inbox:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, dedup_ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.dedup_ttl = dedup_ttl
        self._submit = redis.register_script(_SUBMIT)

    async def submit(self, event: Inbound) -> bool:
        """Queue an event once; a repeated platform event id is dropped. True if queued."""
        platform = event.conversation.platform
        queued_at = f"{time.time():.6f}"
        args: list[bytes | str | int] = [
            int(self.dedup_ttl * 1000),
            STREAM_MAXLEN,
            encode(event),
            queued_at,
        ]
        try:
            fresh = await self._submit(
                keys=[self.keys.dedup(event.event_id), self.keys.inbox], args=args
            )
        except (RedisError, OSError) as exc:
            raise HandoverFailed(f"inbox unavailable: {type(exc).__name__}") from exc
        if not fresh:
            metrics.MESSAGES_DROPPED.labels(platform, "duplicate").inc()
            log.info("dropped duplicate event %s", event.event_id)
            return False
        kind = "action" if isinstance(event, InboundAction) else "message"
        metrics.MESSAGES_IN.labels(platform, kind).inc()
        return True

    __call__ = submit
