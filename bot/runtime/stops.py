"""Stop requests that reach a running run from outside its conversation's queue.

A `/cancel` (or a platform's stop button) is an inbox entry like any other, queued behind the
run it means to stop; handled in turn, it would only find the run over. So the worker that
first reads such an entry also records it under the conversation (`conv:{…}:stop`, with a
TTL) and publishes it on one channel. Every process listens on that channel
(`Stops.listen`), and a run of that conversation which started from an earlier entry is told
to stop (`Stops.watching`) when the person who asked may stop it. Entry ids order the two:
a stop request only ever stops a run begun before it, so a late or repeated request cannot
stop a later run.

While the channel is cut off (Redis away) a request may be missed; once it is back, the
listener reads the recorded request of each conversation with a run here. A request never
received only means the run finishes and the entry is handled in turn, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated

import redis.asyncio as aioredis
from pydantic import Field
from redis.asyncio.client import PubSub
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.runtime.codec import Codec
from bot.runtime.keys import Keys
from bot.runtime.sessions import entry_order
from loops import Heartbeat, repeat

log = logging.getLogger(__name__)

SUBSCRIBE_WAIT = 5  # seconds for Redis to confirm a subscription
REMEMBERED = 10_000  # newest request per conversation kept in memory, for runs about to start


@dataclass(frozen=True, kw_only=True)
class StopRequest:
    # Stored and published under the short names it always had: a process not yet upgraded
    # still reads what a newer one publishes.
    conversation_id: Annotated[str, Field(alias="conversation")]
    entry_id: Annotated[str, Field(alias="entry")]  # the inbox entry of the request
    user_id: Annotated[str, Field(alias="user")]
    groups: tuple[str, ...] = ()


RECORD: Codec[StopRequest] = Codec(StopRequest)


@dataclass(kw_only=True)
class Watch:
    """One run that may be stopped: began with `entry_id`, stoppable by whom `allows`."""

    entry_id: str
    allows: Callable[[StopRequest], bool]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    by: StopRequest | None = None  # the request that stopped it

    def offer(self, request: StopRequest) -> None:
        if self.by is not None or entry_order(request.entry_id) <= entry_order(self.entry_id):
            return
        if not self.allows(request):
            log.info("stop request %s refused: not the requester's", request.entry_id)
            return
        self.by = request
        self.stop.set()


class Stops:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float = 3600.0) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)
        self._watches: dict[str, list[Watch]] = {}
        self._latest: OrderedDict[str, StopRequest] = OrderedDict()

    async def request(self, request: StopRequest) -> None:
        """Record the request and tell every process (one round trip)."""
        raw = RECORD.encode(request)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.keys.stop(request.conversation_id), raw, px=self.ttl_ms)
            pipe.publish(self.keys.stops, raw)
            await pipe.execute()

    @contextlib.contextmanager
    def watching(
        self, conversation_id: str, entry_id: str, allows: Callable[[StopRequest], bool]
    ) -> Iterator[Watch]:
        """A run of `conversation_id` begun with `entry_id`: its `stop` is set by a later
        request that `allows` accepts, heard before it started or while it runs."""
        watch = Watch(entry_id=entry_id, allows=allows)
        watches = self._watches.setdefault(conversation_id, [])
        watches.append(watch)
        if (known := self._latest.get(conversation_id)) is not None:
            watch.offer(known)
        try:
            yield watch
        finally:
            watches.remove(watch)
            if not watches:
                del self._watches[conversation_id]

    def receive(self, request: StopRequest) -> None:
        """A request heard here: remembered for a run about to start, offered to running ones."""
        self._latest[request.conversation_id] = request
        self._latest.move_to_end(request.conversation_id)
        while len(self._latest) > REMEMBERED:
            self._latest.popitem(last=False)
        for watch in self._watches.get(request.conversation_id, ()):
            watch.offer(request)

    async def listen(self, stopping: asyncio.Event, heartbeat: Heartbeat) -> None:
        """Hear stop requests until `stopping`; after each (re)subscription, read the recorded
        request of every conversation with a run here, in case one was missed. A pass is one
        subscription, for as long as it lasts."""

        async def subscribed() -> None:
            async with self.redis.pubsub() as channel:
                await channel.subscribe(self.keys.stops)
                await self._confirmed(channel)
                await self._catch_up()
                heartbeat.beat()
                while not stopping.is_set():
                    message = await channel.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    heartbeat.beat()
                    if message is not None:
                        self._heard(message.get("data"))

        await repeat(stopping, heartbeat, subscribed, 0.0)

    @staticmethod
    async def _confirmed(channel: PubSub) -> None:
        """Wait for Redis's reply to SUBSCRIBE. A pooled connection that a Redis restart left
        stale takes the command without complaint; only the reply shows the subscription is
        live, so the listener is not called recovered while Redis is still away."""
        for _ in range(SUBSCRIBE_WAIT):
            reply = await channel.get_message(timeout=1.0)
            if reply is not None and reply.get("type") == "subscribe":
                return
        raise RedisTimeoutError("Redis did not confirm the stop channel's subscription")

    def _heard(self, raw: object) -> None:
        if not isinstance(raw, str | bytes):
            return
        try:
            self.receive(RECORD.decode(raw))
        except ValueError:
            log.warning("ignoring a malformed stop request")

    async def _catch_up(self) -> None:
        watched = [c for c, w in self._watches.items() if w]
        if not watched:
            return
        recorded = await self.redis.mget([self.keys.stop(c) for c in watched])
        for raw in recorded:
            if raw is not None:
                self._heard(raw)
