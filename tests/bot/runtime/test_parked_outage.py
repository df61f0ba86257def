"""Break it: Redis goes away while a parked reply is due, on the real runtime and its own
Redis client. The redelivery loop degrades (said once) and keeps trying; once Redis is back
the reply goes out exactly once (said recovered once), and nothing is left parked; one the
platform took just before Redis went is recorded when it is back, not posted again."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.base import ConversationKey, DeliveryFailed, MessageRef, OutboundMessage
from bot.ops.health import Health
from bot.runtime.records import sent_value
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import running
from tests.bot.recording import RecordingAdapter, dm
from tests.helpers import until
from tests.private_redis import PrivateRedis, private_redis

DUE_IN = 1.0  # seconds after parking that the reply is due: Redis is gone by then


@pytest.mark.process
async def test_a_redis_outage_while_a_parked_reply_is_due_delays_it_and_it_comes_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    chat = dm()
    reply = OutboundMessage(text="Your answer, late.")
    async with private_redis(tmp_path) as server:
        client = server.client()
        health = Health()
        try:
            async with running(client, ScriptedModel([]), health=health) as harness:
                outbox, adapter = harness.runtime.outbox, harness.adapter
                redelivery = health.loops["redelivery"]
                outbox.backoff = DUE_IN
                parked_at = time.time()
                await outbox.undelivered("e1:outcome", chat, reply, DeliveryFailed("502"))
                await server.down()
                await until(lambda: redelivery.state == "degraded")
                await asyncio.sleep(max(0.0, parked_at + DUE_IN + 0.3 - time.time()))
                assert adapter.texts(chat) == []  # due, but Redis is away
                await server.up()
                await until(lambda: adapter.texts(chat) == [reply.text])
                await until(lambda: redelivery.state == "ok")
                await asyncio.sleep(0.5)  # ten more passes: nothing more
                assert adapter.texts(chat) == [reply.text]
                assert await outbox.parked.count() == 0
                # the outbox key says it went out: a replay under it sends nothing
                await outbox.send(adapter, "e1:outcome", chat, reply)
                assert adapter.texts(chat) == [reply.text]
        finally:
            await client.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.ops.health"]
    said = [line for line in lines if line.startswith("redelivery ")]
    assert len(said) == 2, said
    assert said[0].startswith("redelivery degraded")
    assert said[1].startswith("redelivery recovered after")


@dataclass
class GoneAfterSending(RecordingAdapter):
    """Takes the message, then Redis goes away before Parley can record that it did."""

    server: PrivateRedis | None = None

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        ref = await super().send(conversation, message)
        if self.server is not None:
            server, self.server = self.server, None
            await server.down()
        return ref


@pytest.mark.process
async def test_a_parked_reply_the_platform_took_just_before_redis_went_is_not_posted_again(
    tmp_path: Path,
) -> None:
    """The platform takes the parked reply and Redis goes away before the outbox records
    it: the claim's lease runs out after Redis is back and the reply is claimed again; it is
    recorded as sent (with the id the platform gave), not posted a second time."""
    chat = dm()
    reply = OutboundMessage(text="Your answer, late.")
    async with private_redis(tmp_path) as server:
        client = server.client()
        health = Health()
        adapter = GoneAfterSending()
        try:
            async with running(client, ScriptedModel([]), adapter=adapter, health=health) as h:
                outbox, redelivery = h.runtime.outbox, health.loops["redelivery"]
                outbox.parked.lease = 0.5  # claimed again soon after Redis is back
                await outbox.undelivered("e2:outcome", chat, reply, DeliveryFailed("502"))
                adapter.server = server
                await until(lambda: redelivery.state == "degraded")
                assert adapter.texts(chat) == [reply.text]
                await server.up()

                async def nothing_parked() -> bool:
                    return await outbox.parked.count() == 0

                await until(nothing_parked)
                await until(lambda: redelivery.state == "ok")
                await asyncio.sleep(0.5)
                assert adapter.texts(chat) == [reply.text]
                (posted,) = adapter.posted
                assert await client.get(h.runtime.keys.outbox("e2:outcome")) == sent_value(
                    posted.ref.message_id
                )
        finally:
            await client.aclose()
