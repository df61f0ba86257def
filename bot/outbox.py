"""Idempotent delivery: each outbound message has a key, and a key is delivered at most once.

Processing is at least once (a crashed worker's event is processed again by another), so the
replayed run produces the same keys and the outbox returns what was already posted instead of
posting it again. A key whose send never finished (the sender died mid-call) is not retried:
a possibly missing message is better than a certainly doubled one. But when Redis failed
before the send was tried (the claim may have been stored though its answer was lost), this
process remembers that claim and takes it over on the replay, so an outage loses nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import OrderedDict

import redis.asyncio as aioredis

from adapters.base import ChatAdapter, ConversationKey, MessageRef, OutboundMessage
from bot import metrics
from bot.keys import Keys

log = logging.getLogger(__name__)

_IN_FLIGHT = b"in-flight"
_UNSENT_KEPT = 10_000  # claims remembered as never sent (only failures add to them)


class Outbox:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)
        # Claims this process stored (or may have) without ever calling the platform.
        self._unsent: OrderedDict[str, bytes] = OrderedDict()

    async def send(
        self,
        adapter: ChatAdapter,
        key: str,
        conversation: ConversationKey,
        message: OutboundMessage,
    ) -> MessageRef | None:
        """Post once per key; a replay returns the first post's ref (None if unknown)."""
        redis_key = self.keys.outbox(key)
        claim = self._unsent.get(redis_key) or _IN_FLIGHT + b":" + uuid.uuid4().hex.encode()
        try:
            claimed = await self.redis.set(redis_key, claim, nx=True, px=self.ttl_ms)
        except BaseException:
            self._remember_unsent(redis_key, claim)
            raise
        previous: bytes | None = None
        if not claimed:
            previous = await self.redis.get(redis_key)  # type: ignore[assignment]
            # Our own claim from before an error, and nothing was sent: go ahead.
            claimed = previous is not None and previous == self._unsent.get(redis_key)
        self._unsent.pop(redis_key, None)
        if not claimed:
            metrics.DELIVERIES.labels(conversation.platform, "replayed").inc()
            if previous and not previous.startswith(_IN_FLIGHT):
                return MessageRef(conversation=conversation, message_id=json.loads(previous))
            log.warning("not re-sending %s: an earlier attempt may have posted it", key)
            return None
        try:
            ref = await adapter.send(conversation, message)
        except BaseException:
            metrics.DELIVERIES.labels(conversation.platform, "failed").inc()
            try:
                await self.redis.delete(redis_key)
            except BaseException:
                self._remember_unsent(redis_key, claim)  # the send failed: nothing went out
                raise
            raise
        await self.redis.set(redis_key, json.dumps(ref.message_id), px=self.ttl_ms)
        metrics.DELIVERIES.labels(conversation.platform, "sent").inc()
        return ref

    def _remember_unsent(self, redis_key: str, claim: bytes) -> None:
        self._unsent[redis_key] = claim
        while len(self._unsent) > _UNSENT_KEPT:
            self._unsent.popitem(last=False)

    async def edit(
        self, adapter: ChatAdapter, key: str, ref: MessageRef, message: OutboundMessage
    ) -> None:
        """Edit once per key (an edit is harmless to repeat, but not worth a second call)."""
        redis_key = self.keys.outbox(key)
        if not await self.redis.set(redis_key, _IN_FLIGHT, nx=True, px=self.ttl_ms):
            return
        try:
            await adapter.edit(ref, message)
        except BaseException:
            await self.redis.delete(redis_key)
            raise
        await self.redis.set(redis_key, b"done", px=self.ttl_ms)
