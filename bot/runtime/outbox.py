"""Idempotent delivery: each outbound message has a key, and a key is delivered at most once.

Processing is at least once (a crashed worker's event is processed again by another), so the
replayed run produces the same keys and the outbox returns what was already posted instead of
posting it again. A key whose send never finished (the sender died mid-call) is not retried:
a possibly missing message is better than a certainly doubled one. But when Redis failed
before the send was tried (the claim may have been stored though its answer was lost), this
process remembers that claim and takes it over on the replay, so an outage loses nothing.

A send the platform does not take is retried a few times with backoff when the failure may
pass; if it still fails, the message is parked in Redis and `redeliver` keeps trying it in
the background until the platform answers again (or, after `give_up_after`, tells the chat
that an earlier reply could not be delivered). A refusal that trying again cannot change
("chat not found", "bot was blocked") is given up at once, with a log line. Either way the
caller goes on: delivery failure never escapes `send` (a Redis failure does, so the entry
is handled again once Redis is back).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import redis.asyncio as aioredis
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from adapters.base import (
    Button,
    ConversationKey,
    DeliveryError,
    MessageRef,
    OutboundMessage,
)
from adapters.platform import ChatAdapter
from bot.ops import metrics
from bot.runtime.holding import PendingWrites
from bot.runtime.keys import Keys
from bot.runtime.records import (
    DONE,
    FAILED,
    GIVEN_UP,
    IN_FLIGHT,
    PARKED,
    record_sent,
    sent_ref,
)

log = logging.getLogger(__name__)

# Told when a parked message finally went out, e.g. to attach a decision to its message.
Delivered = Callable[[OutboundMessage, MessageRef], Awaitable[None]]

# Claim due parked messages: move each one's time forward by a lease so that one worker
# tries it at a time; a worker that dies mid-try leaves it to be tried again after the lease.
_CLAIM = """
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, member in ipairs(due) do
  redis.call('zadd', KEYS[1], ARGV[2], member)
end
return due
"""

# Give up an answer's key unless an answer is out or on its way (a send in flight, a
# delivered id, a parked reply); a streamed half message's marker is taken over, so its
# stale stream finds the key moved on and posts nothing. 1 when the user got no answer.
_GIVE_UP = """
local found = redis.call('get', KEYS[1])
if not found or string.sub(found, 1, 8) == '{"live":' then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if found == ARGV[1] or found == ARGV[3] then return 1 end
return 0
"""


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, DeliveryError):
        return not exc.permanent
    return isinstance(exc, ConnectionError | TimeoutError)


_UNSENT_KEPT = 10_000  # claims remembered as never sent (only failures add to them)


class Outbox:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        ttl: float,
        lost_text: str,  # said when a reply is given up on (the engine's sentence)
        attempts: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 30.0,
        give_up_after: float = 6 * 3600.0,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)
        self.lost_text = lost_text
        self.attempts = attempts
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.give_up_after = give_up_after
        # a parked message outlives its redelivery window, whatever the dedup TTL
        self.parked_ms = max(self.ttl_ms, int(give_up_after * 1000) + 60_000)
        self._claim = redis.register_script(_CLAIM)
        self._give_up = redis.register_script(_GIVE_UP)
        # Claims this process stored (or may have) without ever calling the platform.
        self._unsent: OrderedDict[str, bytes] = OrderedDict()

    async def send(
        self,
        adapter: ChatAdapter,
        key: str,
        conversation: ConversationKey,
        message: OutboundMessage,
        later: PendingWrites | None = None,
    ) -> MessageRef | None:
        """Post once per key; a replay returns the first post's ref (None if unknown).

        None also when the platform did not take the message: it is parked for redelivery,
        or given up if the platform refused it for good. With `later`, the post's record
        waits there for the lock holder's next session save (one round trip for both)."""
        redis_key = self.keys.outbox(key)
        claim = self._unsent.get(redis_key) or IN_FLIGHT + b":" + uuid.uuid4().hex.encode()
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
            if previous is None or previous.startswith(IN_FLIGHT):
                log.warning("not re-sending %s: an earlier attempt may have posted it", key)
            return sent_ref(conversation, previous)
        try:
            ref = await self._attempts(adapter, conversation, message)
        except asyncio.CancelledError:
            await self._release(redis_key, claim)
            raise
        except Exception as exc:
            try:
                await self.undelivered(key, conversation, message, exc)
            except Exception:
                # Redis is gone too: nothing went out, so the replay may send it.
                await self._release(redis_key, claim)
                raise
            return None
        await record_sent(self.redis, redis_key, ref.message_id, self.ttl_ms, later)
        metrics.DELIVERIES.labels(conversation.platform, "sent").inc()
        return ref

    async def refused(self, key: str) -> bool:
        """Whether the send under `key` was given up: the platform refused it for good."""
        return await self.redis.get(self.keys.outbox(key)) == FAILED

    async def give_up(self, key: str) -> bool:
        """The entry behind `key` was given up: close the key to any later send (a run that
        lost its lock may still be going), and tell whether its user is still unanswered."""
        found = await self._give_up(
            keys=[self.keys.outbox(key)], args=[GIVEN_UP, self.ttl_ms, FAILED]
        )
        return bool(int(found))

    async def _release(self, redis_key: str, claim: bytes) -> None:
        """Give up a claim whose send did not go out (remembered if Redis cannot be told)."""
        try:
            await self.redis.delete(redis_key)
        except BaseException:
            self._remember_unsent(redis_key, claim)
            raise

    def _remember_unsent(self, redis_key: str, claim: bytes) -> None:
        self._unsent[redis_key] = claim
        while len(self._unsent) > _UNSENT_KEPT:
            self._unsent.popitem(last=False)

    async def edit(
        self, adapter: ChatAdapter, key: str, ref: MessageRef, message: OutboundMessage
    ) -> None:
        """Edit once per key (an edit is harmless to repeat, but not worth a second call)."""
        redis_key = self.keys.outbox(key)
        if not await self.redis.set(redis_key, IN_FLIGHT, nx=True, px=self.ttl_ms):
            return
        try:
            await self._attempts(adapter, ref.conversation, message, edit=ref)
        except BaseException:
            await self.redis.delete(redis_key)
            raise
        await self.redis.set(redis_key, DONE, px=self.ttl_ms)

    async def _attempts(
        self,
        adapter: ChatAdapter,
        conversation: ConversationKey,
        message: OutboundMessage,
        *,
        edit: MessageRef | None = None,
        attempts: int | None = None,
    ) -> MessageRef:
        retrying = AsyncRetrying(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(attempts or self.attempts),
            wait=wait_exponential_jitter(
                multiplier=self.backoff, max=self.backoff_max, jitter=self.backoff
            ),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                if edit is not None:
                    await adapter.edit(edit, message)
                    return edit
                return await adapter.send(conversation, message)
        raise AssertionError("unreachable: tenacity re-raises the last failure")

    async def undelivered(
        self, key: str, conversation: ConversationKey, message: OutboundMessage, exc: Exception
    ) -> None:
        platform = conversation.platform
        metrics.DELIVERIES.labels(platform, "failed").inc()
        if not isinstance(exc, DeliveryError | ConnectionError | TimeoutError):
            log.error("could not deliver %s to %s", key, conversation.id, exc_info=exc)
            await self.redis.set(self.keys.outbox(key), FAILED, px=self.ttl_ms)
            return
        if not _transient(exc):
            log.warning(
                "giving up on %s in %s: %s refused it (%s)",
                key,
                conversation.id,
                platform,
                _why(exc),
            )
            await self.redis.set(self.keys.outbox(key), FAILED, px=self.ttl_ms)
            return
        log.warning(
            "could not deliver %s to %s (%s); will keep trying", key, conversation.id, _why(exc)
        )
        parked = {
            "conversation": conversation.id,
            "message": {
                **dataclasses.asdict(message),
                "allowed_mentions": sorted(message.allowed_mentions),
            },
            "since": time.time(),
            "tries": 0,
        }
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.outbox(key), PARKED, px=self.ttl_ms)
            pipe.set(self.keys.undelivered_message(key), json.dumps(parked), px=self.parked_ms)
            pipe.zadd(self.keys.undelivered, {key: time.time() + self.backoff})
            await pipe.execute()

    # --- redelivery -------------------------------------------------------------------------

    async def redeliver(
        self,
        adapters: Mapping[str, ChatAdapter],
        on_delivered: Delivered | None = None,
        *,
        batch: int = 20,
        lease: float = 60.0,
    ) -> int:
        """Try the parked messages that are due once each; returns how many went out."""
        now = time.time()
        due = await self._claim(keys=[self.keys.undelivered], args=[now, now + lease, batch])
        delivered = 0
        for member in due:
            key = member.decode() if isinstance(member, bytes) else str(member)
            if await self._redeliver_one(key, adapters, on_delivered):
                delivered += 1
        return delivered

    async def _redeliver_one(
        self, key: str, adapters: Mapping[str, ChatAdapter], on_delivered: Delivered | None
    ) -> bool:
        raw = await self.redis.get(self.keys.undelivered_message(key))
        if raw is None:  # expired, or delivered by a worker that died before cleaning up
            await self.redis.zrem(self.keys.undelivered, key)
            return False
        try:
            parked = json.loads(raw)
            conversation = ConversationKey.parse(parked["conversation"])
            fields = dict(parked["message"])
            fields["buttons"] = tuple(Button(**button) for button in fields["buttons"])
            fields["allowed_mentions"] = frozenset(fields.get("allowed_mentions") or ())
            fields.pop("plan", None)  # a prompt delivered late is the plain prompt: no plan drawn
            message = OutboundMessage(**fields)
        except (ValueError, LookupError, TypeError, AssertionError) as exc:
            # one unreadable record must not hold up every other parked reply
            log.error("dropping unreadable parked reply %s (%s)", key, type(exc).__name__)
            await self._forget(key, FAILED)
            return False
        adapter = adapters.get(conversation.platform)
        if adapter is None:
            return False  # another process, one with this platform, will deliver it
        try:
            ref = await self._attempts(adapter, conversation, message, attempts=1)
        except Exception as exc:
            await self._retry_later(key, conversation, parked, exc, adapter)
            return False
        log.info("delivered %s to %s after %d tries", key, conversation.id, parked["tries"] + 1)
        metrics.DELIVERIES.labels(conversation.platform, "redelivered").inc()
        await self._forget(key, json.dumps(ref.message_id).encode())
        if on_delivered is not None:
            try:
                await on_delivered(message, ref)
            except Exception:
                log.exception("after redelivering %s", key)
        return True

    async def _retry_later(
        self,
        key: str,
        conversation: ConversationKey,
        parked: dict[str, Any],
        exc: Exception,
        adapter: ChatAdapter,
    ) -> None:
        tries = int(parked["tries"]) + 1
        if _transient(exc) and time.time() - float(parked["since"]) < self.give_up_after:
            parked["tries"] = tries
            wait = min(self.backoff_max, self.backoff * 2**tries)
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(self.keys.undelivered_message(key), json.dumps(parked), px=self.parked_ms)
                pipe.zadd(self.keys.undelivered, {key: time.time() + wait})
                await pipe.execute()
            return
        log.warning("giving up on %s after %d tries (%s)", key, tries, _why(exc))
        await self._forget(key, FAILED)
        if _transient(exc):  # the message itself may be what fails: say that something is missing
            try:
                await adapter.send(conversation, OutboundMessage(text=self.lost_text))
            except Exception:
                log.warning("could not tell %s about an undelivered reply", conversation.id)

    async def _forget(self, key: str, outcome: bytes) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.outbox(key), outcome, px=self.ttl_ms)
            pipe.delete(self.keys.undelivered_message(key))
            pipe.zrem(self.keys.undelivered, key)
            await pipe.execute()


def _why(exc: BaseException) -> str:
    return exc.reason if isinstance(exc, DeliveryError) else type(exc).__name__
