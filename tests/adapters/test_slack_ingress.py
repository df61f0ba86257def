"""Slack ingress durability: an event is in the inbox before Slack's 200 (HTTP) or ack
(Socket Mode); while Redis is away Slack gets a 503 or no ack, and its retries of the same
event id are answered once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from adapters.slack import SlackAdapter, SlackConfig
from agent.messages import ChatRequest, ChatResponse
from bot.ops.http import HttpServer
from bot.runtime.inbox import Inbox, decode
from bot.runtime.keys import Keys
from bot.wiring.connection import redis_client
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running, settings
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until
from tests.private_redis import PrivateRedis, private_redis

pytestmark = pytest.mark.network

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def echo(request: ChatRequest) -> ChatResponse:
    return reply(f"echo: {request.messages[-1].text.strip()}")


def lines(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("adapters.slack") and fragment in r.getMessage()
    ]


@contextlib.asynccontextmanager
async def gateway(
    tmp_path: Path, **config: Any
) -> AsyncIterator[tuple[PrivateRedis, aioredis.Redis, FakeSlack, SlackAdapter]]:
    """A Slack adapter queueing into a private Redis that the test can stop and restart."""
    async with private_redis(tmp_path) as server, FakeSlack() as fake:
        client = redis_client(server.url, settings())  # the service's client, with its retry
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="xoxb-test-token", api_url=fake.api_url, handover_timeout=1.0, **config
            )
        )
        adapter.handler = Inbox(client, Keys(), dedup_ttl=600).submit
        await adapter.start()
        try:
            yield server, client, fake, adapter
        finally:
            await adapter.stop()
            await client.aclose()


async def answer_all(
    client: aioredis.Redis, fake: FakeSlack, adapter: SlackAdapter, n: int
) -> None:
    async with running(client, ScriptedModel([echo] * n), adapter=adapter) as harness:  # type: ignore[arg-type]
        await until(lambda: len(fake.posts) >= n)
        await harness.settle()


async def test_http_events_are_stored_before_the_200_and_retried_through_an_outage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters")
    keys = Keys()
    async with gateway(tmp_path, signing_secret=SECRET) as (server, client, fake, adapter):
        http = HttpServer("127.0.0.1", 0)
        http.add_route(*adapter.slack_route())
        await http.start()
        url = f"http://127.0.0.1:{http.port}/slack/events"
        try:
            async with aiohttp.ClientSession() as session:

                async def deliver(event: dict[str, Any], event_id: str, retry: int = 0) -> int:
                    body = json.dumps(fs.event_callback(event, event_id=event_id)).encode()
                    headers = fs.signed(SECRET, body)
                    if retry:
                        headers["X-Slack-Retry-Num"] = str(retry)
                        headers["X-Slack-Retry-Reason"] = "http_error"
                    started = time.monotonic()
                    async with session.post(url, data=body, headers=headers) as response:
                        assert time.monotonic() - started < 3.0  # Slack's ack budget
                        return response.status

                async def send_form(body: bytes) -> int:
                    content_type = "application/x-www-form-urlencoded"
                    headers = fs.signed(SECRET, body, content_type=content_type)
                    async with session.post(url, data=body, headers=headers) as response:
                        return response.status

                before = fs.dm_event("UANA", "before", channel="DANA")
                assert await deliver(before, "EvBEFORE") == 200
                assert await client.xlen(keys.inbox) == 1  # stored by the time of the 200

                await server.down()
                during = {
                    f"EvDURING{n}": fs.dm_event(f"U{n}", f"during {n}", channel=f"D{n}")
                    for n in range(3)
                }
                assert [await deliver(e, i) for i, e in during.items()] == [503, 503, 503]
                command = fs.slash_command("UANA", "status")
                assert await send_form(command) == 503  # the user sees it failed
                await server.up()
                assert await send_form(command) == 200
                # Slack's retries: the failed ones are stored now, a repeat is answered once
                assert [await deliver(e, i, retry=1) for i, e in during.items()] == [200] * 3
                assert [await deliver(e, i, retry=2) for i, e in during.items()] == [200] * 3
                assert await deliver(before, "EvBEFORE", retry=1) == 200
        finally:
            await http.stop()
        events = [decode(f[b"event"]) for _, f in await client.xrange(keys.inbox)]
        assert [e.text for e in events] == [
            "before",
            "status",
            "during 0",
            "during 1",
            "during 2",
        ]
        await answer_all(client, fake, adapter, 5)
        for channel, text in [("DANA", "before")] + [(f"D{n}", f"during {n}") for n in range(3)]:
            assert [p.text for p in fake.in_channel(channel)] == [f"echo: {text}"]
    assert len(lines(caplog, "refused for now")) == 1
    assert len(lines(caplog, "stored again")) == 1
    assert "during" not in caplog.text


async def test_socket_mode_acks_only_what_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters")
    keys = Keys()
    async with gateway(tmp_path, app_token="xapp-test") as (server, client, fake, adapter):
        payload = fs.event_callback(fs.dm_event("UANA", "over the socket"), event_id="EvSOCK")

        def envelope(envelope_id: str, attempt: int) -> dict[str, Any]:
            return {
                "envelope_id": envelope_id,
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": attempt,
                "retry_reason": "timeout" if attempt else "",
                "payload": payload,
            }

        def acked(envelope_id: str) -> bool:
            return any(a.get("envelope_id") == envelope_id for a in fake.socket_acks)

        await server.down()
        await fake.socket_send(envelope("env-1", 0))
        await until(lambda: bool(lines(caplog, "refused for now")))
        await asyncio.sleep(0.3)
        assert not acked("env-1")  # not stored, not acknowledged: Slack sends it again
        await server.up()
        await fake.socket_send(envelope("env-2", 1))
        await until(lambda: acked("env-2"))
        await fake.socket_send(envelope("env-3", 2))
        await until(lambda: acked("env-3"))
        events = [decode(f[b"event"]) for _, f in await client.xrange(keys.inbox)]
        assert [e.text for e in events] == ["over the socket"]
        await answer_all(client, fake, adapter, 1)
        assert [p.text for p in fake.in_channel("DANA")] == ["echo: over the socket"]
    assert not acked("env-1")
