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
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

import redis.asyncio as aioredis
from pydantic import BaseModel, field_validator
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from adapters.base import (
    ConversationKey,
    DeliveryError,
    MessageRef,
    OutboundMessage,
)
from adapters.platform import ChatAdapter
from bot.ops import metrics
from bot.runtime.due import DueKeys, DueWork
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
    sent_value,
)
from loops import exponential

log = logging.getLogger(__name__)

# Told when a parked message finally went out, e.g. to attach a decision to its message.
Delivered = Callable[[OutboundMessage, MessageRef], Awaitable[None]]

PARK_LEASE = 60.0  # seconds one worker has to try a claimed parked reply
PARK_BATCH = 20  # parked replies tried per pass


class Parked(BaseModel):
    """A reply the platform did not take, kept for redelivery (due work, one per outbox key)."""

    conversation: str
    message: OutboundMessage
    since: float
    tries: int = 0

    @field_validator("conversation")
    @classmethod
    def _parses(cls, value: str) -> str:
        ConversationKey.parse(value)  # raises for a key no platform could deliver to
        return value


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
        self.parked = DueWork(
            redis,
            DueKeys(
                due=keys.undelivered_due,
                claimed=keys.undelivered_claimed,
                record=keys.undelivered_message,
            ),
            Parked,
            kind="parked reply",
            lease=PARK_LEASE,
            batch=PARK_BATCH,
            dropped=self._unreadable,
        )
        self._adopted = False  # parked replies stored before they were due work, taken over
        self._give_up = redis.register_script(_GIVE_UP)
        # Claims this process stored (or may have) without ever calling the platform.
        self._unsent: OrderedDict[str, bytes] = OrderedDict()
        # Parked replies the platform took but Redis was not told of (it went away between
        # the two): a re-claim records them instead of posting them again.
        self._unrecorded: OrderedDict[str, MessageRef] = OrderedDict()

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
        parked = Parked(conversation=conversation.id, message=message, since=time.time())
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.outbox(key), PARKED, px=self.ttl_ms)
            at = time.time() + self.backoff
            self.parked.putting(pipe, key, parked, at, self.parked_ms / 1000)
            await pipe.execute()

    # --- redelivery -------------------------------------------------------------------------

    async def redeliver(
        self,
        adapters: Mapping[str, ChatAdapter],
        on_delivered: Delivered | None = None,
    ) -> int:
        """Try the parked messages that are due once each; returns how many went out. One
        whose record cannot be read is dropped (and counted), not tried on every pass."""
        await self._adopt()
        delivered = 0
        for key, parked in await self.parked.claim(time.time()):
            if await self._redeliver_one(key, parked, adapters, on_delivered):
                delivered += 1
        return delivered

    async def _adopt(self) -> None:
        """Take over the parked replies of a version before they were due work (their
        records read the same), once per process."""
        if self._adopted:
            return
        found: list[tuple[bytes, float]] = await self.redis.zrange(  # type: ignore[assignment]
            self.keys.undelivered, 0, PARK_BATCH * 50, withscores=True
        )
        if found:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.undelivered_due, {member: at for member, at in found})
                pipe.zrem(self.keys.undelivered, *[member for member, _ in found])
                await pipe.execute()
            log.info("took over %d parked replies", len(found))
        if len(found) <= PARK_BATCH * 50:
            self._adopted = True

    async def _unreadable(self, key: str) -> None:
        await self.redis.set(self.keys.outbox(key), FAILED, px=self.ttl_ms)

    async def _redeliver_one(
        self,
        key: str,
        parked: Parked,
        adapters: Mapping[str, ChatAdapter],
        on_delivered: Delivered | None,
    ) -> bool:
        conversation = ConversationKey.parse(parked.conversation)
        # a prompt delivered late is the plain prompt: no plan drawn
        message = dataclasses.replace(parked.message, plan=None)
        adapter = adapters.get(conversation.platform)
        if adapter is None:
            return False  # another process, one with this platform, takes it once the lease ends
        ref = self._unrecorded.get(key)
        if ref is None:
            try:
                ref = await self._attempts(adapter, conversation, message, attempts=1)
            except Exception as exc:
                await self._retry_later(key, conversation, parked, exc, adapter)
                return False
            log.info("delivered %s to %s after %d tries", key, conversation.id, parked.tries + 1)
            metrics.DELIVERIES.labels(conversation.platform, "redelivered").inc()
            self._unrecorded[key] = ref
            while len(self._unrecorded) > _UNSENT_KEPT:
                self._unrecorded.popitem(last=False)
        await self._forget(key, sent_value(ref.message_id))
        self._unrecorded.pop(key, None)
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
        parked: Parked,
        exc: Exception,
        adapter: ChatAdapter,
    ) -> None:
        tries = parked.tries + 1
        if _transient(exc) and time.time() - parked.since < self.give_up_after:
            wait = exponential(self.backoff, self.backoff_max, tries)
            again = parked.model_copy(update={"tries": tries})
            await self.parked.again(key, time.time() + wait, again, self.parked_ms / 1000)
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
            self.parked.forgetting(pipe, key)
            await pipe.execute()


def _why(exc: BaseException) -> str:
    return exc.reason if isinstance(exc, DeliveryError) else type(exc).__name__
