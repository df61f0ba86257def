"""The inbox: platform events, deduplicated by their platform id, queued on a Redis Stream.

Adapters hand every event to `Inbox.submit`, which returns as soon as the event is stored,
so a platform is acknowledged at once (Slack wants an answer within 3 s) and only then. The
dedup mark and the stream entry are written by one script, so either both exist or neither:
an event whose write failed comes back from its platform and is not taken for a duplicate.
When Redis cannot take the event, `submit` raises `HandoverFailed`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from adapters.base import (
    Actor,
    Attachment,
    ContextMessage,
    ConversationKey,
    HandoverFailed,
    Inbound,
    InboundAction,
    InboundMessage,
    MessageRef,
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


def encode(event: Inbound) -> str:
    kind = "action" if isinstance(event, InboundAction) else "message"
    return json.dumps({"kind": kind, "event": asdict(event)}, ensure_ascii=False)


def decode(payload: str | bytes) -> Inbound:
    data = json.loads(payload)
    event: dict[str, Any] = dict(data["event"])
    event["conversation"] = ConversationKey(**event["conversation"])
    actor = dict(event["actor"])
    actor["groups"] = tuple(actor.get("groups") or ())
    event["actor"] = Actor(**actor)
    if data["kind"] == "action":
        if event.get("message"):
            message = dict(event["message"])
            message["conversation"] = ConversationKey(**message["conversation"])
            event["message"] = MessageRef(**message)
        return InboundAction(**event)
    event["attachments"] = tuple(Attachment(**a) for a in event.get("attachments") or ())
    event["context"] = tuple(ContextMessage(**c) for c in event.get("context") or ())
    return InboundMessage(**event)


def decode_entry(fields: dict[bytes, bytes]) -> tuple[Inbound, str]:
    """A stream entry's event and conversation id; raises for anything a worker could not
    handle."""
    event = decode(fields[b"event"])
    if not isinstance(event.event_id, str) or not isinstance(event.actor.user_id, str):
        raise TypeError("event and user ids must be strings")
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
        args: list[str | int] = [
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
