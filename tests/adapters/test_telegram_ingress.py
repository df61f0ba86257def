"""Telegram ingress durability: polling confirms an update only once it is in the inbox,
survives a Redis outage and updates python-telegram-bot cannot parse; the webhook answers
503 while the inbox is down and 400 for what can never be parsed."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY
from telegram.error import TimedOut
from telegram.request import HTTPXRequest

from agent.messages import ChatRequest, ChatResponse
from bot.ops.http import HttpServer
from bot.runtime.inbox import Inbox, decode
from bot.runtime.keys import Keys
from bot.wiring.connection import redis_client
from tests.adapters.test_telegram import ANA, adapter_for, bot
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running, settings
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until
from tests.private_redis import private_redis

SECRET = "webhook-secret"
REJECTED = ("parley_webhook_rejected_total", {"platform": "telegram", "reason": "secret"})
MESSAGES = 40


def echo(request: ChatRequest) -> ChatResponse:
    return reply(f"echo: {request.messages[-1].text.strip()}")


def lines(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("adapters.telegram") and fragment in r.getMessage()
    ]


def unparseable(fake: FakeTelegram, text: str) -> dict[str, Any]:
    """A private message whose sender lacks `is_bot`: python-telegram-bot refuses it."""
    update = fake.message(chat_id=ANA, user_id=ANA, text=text)
    del update["message"]["from"]["is_bot"]
    return update


async def test_polling_loses_nothing_across_a_redis_outage(
    tmp_path: Path, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters")
    keys = Keys()
    async with private_redis(tmp_path) as server:
        client = redis_client(server.url, settings())  # the service's client, with its retry
        adapter = adapter_for(
            telegram, backoff=0.05, backoff_max=0.5, handover_timeout=3, stale_margin=1
        )
        sender = adapter_for(telegram)
        try:
            adapter.handler = Inbox(client, keys, dedup_ttl=600).submit
            await adapter.start()
            await adapter.start_polling()

            def send(n: int) -> None:
                chat = 1000 + n
                telegram.push(telegram.message(chat_id=chat, user_id=chat, text=f"message {n}"))

            async def queued(count: int) -> bool:
                return bool(await client.xlen(keys.inbox) == count)

            for n in range(10):
                send(n)
                await asyncio.sleep(0.02)
            await until(lambda: queued(10))
            await server.down()
            for n in range(10, 30):  # 20 messages while Redis is away
                send(n)
                await asyncio.sleep(0.1)
            await until(lambda: bool(lines(caplog, "degraded")), within=20)
            await until(lambda: not adapter.polling_health()[0], within=20)
            assert "HandoverFailed" in adapter.polling_health()[1]
            await server.up()
            for n in range(30, MESSAGES):
                send(n)
                await asyncio.sleep(0.02)
            await until(lambda: queued(MESSAGES))
            await until(lambda: not telegram.updates)  # every update confirmed
            assert adapter.polling_health()[0]
            await adapter.stop()

            entries = await client.xrange(keys.inbox)
            events = [decode(fields[b"event"]) for _, fields in entries]
            assert sorted(e.text for e in events) == sorted(f"message {n}" for n in range(40))
            assert len(lines(caplog, "degraded")) == 1 and len(lines(caplog, "recovered")) == 1
            assert not any("message " in r.getMessage() for r in caplog.records)

            # the workers answer each message exactly once
            async with running(client, ScriptedModel([echo] * MESSAGES), adapter=sender) as h:  # type: ignore[arg-type]
                await until(lambda: all(telegram.chat(1000 + n) for n in range(MESSAGES)))
                await h.settle()
            for n in range(MESSAGES):
                assert [p.text for p in telegram.chat(1000 + n)] == [f"echo: message {n}"]
        finally:  # also when it failed: their HTTP sessions are closed where they are owned
            await adapter.stop()
            await sender.stop()
            await client.aclose()


async def test_an_update_ptb_cannot_parse_is_skipped_also_after_a_restart(
    redis, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    first = telegram.push(unparseable(telegram, "my secret diary"))
    telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hello"))
    model = ScriptedModel([echo, echo])
    async with bot(redis, telegram, model) as (harness, _):
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    # Stopped: the next one waits at the head of the queue for whoever polls next.
    second = telegram.push(unparseable(telegram, "another secret"))
    telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="again"))
    async with bot(redis, telegram, model) as (harness, adapter):
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
        await until(lambda: not telegram.updates)  # the bad ones are confirmed too
        assert adapter.polling and adapter.polling_health()[0]
    assert [p.text for p in telegram.chat(ANA)] == ["echo: hello", "echo: again"]
    for update in (first, second):
        assert lines(caplog, f"skipping Telegram update {update['update_id']}")
    assert "secret" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_polling_outlives_telegram_errors_at_start_and_while_polling(
    redis, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters")
    telegram.answer_error("deleteWebhook", 500, "Internal Server Error")
    telegram.answer_error("getUpdates", 502, "Bad Gateway")
    telegram.answer_error("getUpdates", 502, "Bad Gateway")
    telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="still there?"))
    async with bot(redis, telegram, ScriptedModel([echo]), backoff=0.05) as (harness, adapter):
        await until(lambda: bool(telegram.chat(ANA)), within=20)
        await harness.settle()
        # the failed sign-in and the failed polls are one outage: one line each way
        [degraded] = lines(caplog, "degraded")
        assert degraded.startswith("Telegram updates degraded (NetworkError)")
        assert len(lines(caplog, "Telegram updates recovered after")) == 1
        ok, detail = adapter.polling_health()
        assert ok and detail.startswith("last getUpdates")
    assert [p.text for p in telegram.chat(ANA)] == ["echo: still there?"]
    assert adapter.polling_health() == (True, "not polling")


def nested(depth: int) -> dict[str, Any]:
    message: dict[str, Any] = {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}}
    for n in range(depth):
        message = {**message, "message_id": n + 2, "reply_to_message": message}
    return message


async def test_the_webhook_answers_after_queueing_and_refuses_what_it_cannot_store(
    tmp_path: Path, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters")
    keys = Keys()
    async with private_redis(tmp_path) as server:
        client = redis_client(server.url, settings())  # the service's client, with its retry
        adapter = adapter_for(
            telegram, mode="webhook", webhook_url="http://x/", webhook_secret=SECRET
        )
        adapter.handler = Inbox(client, keys, dedup_ttl=600).submit
        http = HttpServer("127.0.0.1", 0)
        http.add_route(*adapter.webhook_route())
        await http.start()
        url = f"http://127.0.0.1:{http.port}/telegram/webhook"
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        try:
            async with aiohttp.ClientSession() as session:

                async def post(body: Any) -> int:
                    data = body if isinstance(body, bytes) else None
                    async with session.post(
                        url, json=None if data else body, data=data, headers=headers
                    ) as response:
                        return response.status

                before = telegram.message(chat_id=ANA, user_id=ANA, text="before")
                forged = REGISTRY.get_sample_value(*REJECTED) or 0.0
                async with session.post(url, json=before, headers={}) as response:
                    assert response.status == 403
                wrong = {"X-Telegram-Bot-Api-Secret-Token": "guessed"}
                async with session.post(url, json=before, headers=wrong) as response:
                    assert response.status == 403
                assert REGISTRY.get_sample_value(*REJECTED) == forged + 2
                assert await post(before) == 200
                assert await client.xlen(keys.inbox) == 1  # in the inbox by the 200

                await server.down()
                during = [
                    telegram.message(chat_id=ANA, user_id=ANA, text=f"during {n}") for n in range(3)
                ]
                assert [await post(u) for u in during] == [503, 503, 503]
                await server.up()
                # Telegram redelivers each, some twice: each is stored once
                assert [await post(u) for u in during + during] == [200] * 6

                poison = unparseable(telegram, "private words")
                mistyped = {"update_id": 77, "message": {"message_id": "x", "chat": 3}}
                deep = {"update_id": 78, "message": nested(600)}
                deep_json = b"[" * 100_000 + b"]" * 100_000
                assert await post(poison) == 400
                assert await post(mistyped) == 400
                assert await post(deep) == 400
                assert await post(deep_json) == 400
                assert await post([1, 2]) == 400
        finally:
            await http.stop()
            await adapter.stop()
            events = [decode(f[b"event"]) for _, f in await client.xrange(keys.inbox)]
            await client.aclose()
    assert [e.text for e in events] == ["before", "during 0", "during 1", "during 2"]
    assert len(lines(caplog, "refused for now")) == 1
    for update_id in (poison["update_id"], 77, 78):
        assert lines(caplog, f"refusing Telegram update {update_id}")
    assert "private words" not in caplog.text


async def test_the_webhook_asks_for_redelivery_while_telegram_cannot_sign_it_in(
    telegram: FakeTelegram, redis: aioredis.Redis
) -> None:
    keys = Keys()
    adapter = adapter_for(telegram, mode="webhook", webhook_url="http://x/", webhook_secret=SECRET)
    adapter.handler = Inbox(redis, keys, dedup_ttl=600).submit
    http = HttpServer("127.0.0.1", 0)
    http.add_route(*adapter.webhook_route())
    await http.start()
    url = f"http://127.0.0.1:{http.port}/telegram/webhook"
    update = telegram.message(chat_id=ANA, user_id=ANA, text="early")
    try:
        async with aiohttp.ClientSession() as session:
            telegram.answer_error("getMe", 502, "Bad Gateway")  # Telegram away at first
            headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            statuses = []
            for _ in range(2):
                async with session.post(url, json=update, headers=headers) as response:
                    statuses.append(response.status)
        assert statuses == [503, 200]  # Telegram redelivers; the second try is stored
        assert await redis.xlen(keys.inbox) == 1
    finally:
        await http.stop()
        await adapter.stop()


class LosesACancel(HTTPXRequest):
    """PTB's long-poll transport, but the first cancellation that reaches a poll is lost, as
    when the client's own read timeout fires in the same moment: its timeout scope takes the
    cancellation for its own (uncancels the task) and the poll ends in TimedOut."""

    def __init__(self) -> None:
        super().__init__(read_timeout=11)
        self.polling = asyncio.Event()
        self.lost = False

    async def do_request(self, url: str, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        self.polling.set()
        try:
            return await super().do_request(url, *args, **kwargs)
        except asyncio.CancelledError:
            if self.lost:
                raise
            self.lost = True
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            raise TimedOut("Timed out") from None


async def test_polling_stops_even_when_the_http_client_loses_a_cancellation(
    telegram: FakeTelegram,
) -> None:
    """Was: the stop waited for ever on a poller that took the lost cancellation for a
    timed-out poll and polled on (a SIGTERM'd process did not exit)."""
    adapter = adapter_for(telegram)
    request = LosesACancel()
    adapter.ingress.request = request
    try:
        await adapter.start()
        await adapter.start_polling()
        await asyncio.wait_for(request.polling.wait(), 10)
        await asyncio.sleep(0.2)  # inside the long poll
        poller = adapter.ingress._poller
        assert poller is not None
        began = time.monotonic()
        await asyncio.wait_for(adapter.stop_polling(), 10)  # cancels it again on timing out
        assert request.lost and poller.done() and time.monotonic() - began < 3
    finally:
        await adapter.stop()
        await request.shutdown()
