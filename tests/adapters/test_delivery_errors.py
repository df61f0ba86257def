"""What the platforms' error answers become: Undeliverable when trying again cannot help,
DeliveryFailed when it may; the real SDKs against the fakes."""

from __future__ import annotations

import logging
import time

import pytest

from adapters.base import (
    ConversationKey,
    DeliveryError,
    DeliveryFailed,
    MessageRef,
    OutboundMessage,
    Undeliverable,
)
from adapters.slack import SlackAdapter, SlackConfig
from adapters.telegram import TelegramAdapter, TelegramConfig
from adapters.telegram.stream import TelegramLive
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.network

ANA, GROUP = 42, -100123
TO_ANA = ConversationKey(platform="telegram", chat_id=str(ANA))


@pytest.mark.parametrize(
    ("status", "description", "permanent"),
    [
        (403, "Forbidden: bot was blocked by the user", True),
        (400, "Bad Request: chat not found", True),
        (401, "Unauthorized", True),
        (502, "Bad Gateway", False),
        (500, "Internal Server Error", False),
    ],
)
async def test_telegram_errors_map_to_the_tree(
    telegram: FakeTelegram, status: int, description: str, permanent: bool
) -> None:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    try:
        telegram.answer_error("sendMessage", status, description)
        with pytest.raises(DeliveryError) as caught:
            await adapter.send(TO_ANA, OutboundMessage(text="hello"))
        assert isinstance(caught.value, Undeliverable if permanent else DeliveryFailed)
        assert caught.value.permanent is permanent
        assert len(telegram.method_calls("sendMessage")) == 1  # neither is retried here
    finally:
        await adapter.stop()


async def test_telegram_waits_out_a_short_retry_after_but_not_a_long_one(
    telegram: FakeTelegram,
) -> None:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    try:
        telegram.fail_next("sendMessage", retry_after=3600)
        started = time.monotonic()
        with pytest.raises(DeliveryFailed):
            await adapter.send(TO_ANA, OutboundMessage(text="hello"))
        assert time.monotonic() - started < 5  # surfaced for the outbox to park, not slept
        telegram.fail_next("sendMessage", retry_after=1)
        ref = await adapter.send(TO_ANA, OutboundMessage(text="hello again"))
        assert [p.text for p in telegram.chat(ANA)] == ["hello again"]
        assert ref.message_id == str(telegram.chat(ANA)[0].message_id)
    finally:
        await adapter.stop()


async def test_a_long_message_keeps_its_order_through_a_retry_after(
    telegram: FakeTelegram,
) -> None:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    text = "\n\n".join(f"part {n}: " + "words " * 700 for n in range(3))
    try:
        telegram.fail_next("sendMessage", retry_after=1)
        await adapter.send(TO_ANA, OutboundMessage(text=text))
        posted = [p.text for p in telegram.chat(ANA)]
        assert len(posted) >= 3
        starts = [next(n for n in range(3) if f"part {n}:" in p) for p in posted if "part" in p]
        assert starts == sorted(starts)
    finally:
        await adapter.stop()


async def test_a_streamed_message_is_finished_through_the_adapter(
    telegram: FakeTelegram,
) -> None:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    group = ConversationKey(platform="telegram", chat_id=str(GROUP))
    try:
        live = TelegramLive(poster=adapter, conversation=group, draft=False)
        await live.show("The answer so f")
        assert live.message_id is not None
        telegram.answer_error("editMessageText", 502, "Bad Gateway")
        with pytest.raises(DeliveryFailed):  # mapped, for the outbox: not PTB's NetworkError
            await live.finish(OutboundMessage(text="The answer so far, whole."))
        long = "\n\n".join(f"paragraph {n}: " + "words " * 300 for n in range(6))
        ref = await live.finish(OutboundMessage(text=long))
        parts = telegram.chat(GROUP)
        assert len(parts) >= 2 and parts[0].message_id == int(live.message_id)
        # the ref names every part, so an edit reaches them all
        every = ",".join(str(part.message_id) for part in parts)
        assert ref == MessageRef(conversation=group, message_id=every)
    finally:
        await adapter.stop()


@pytest.mark.parametrize(
    ("error", "permanent"),
    [
        ("channel_not_found", True),
        ("not_in_channel", True),
        ("is_archived", True),
        ("account_inactive", True),
        ("internal_error", False),
        ("ratelimited", False),
    ],
)
async def test_slack_errors_map_to_the_tree(error: str, permanent: bool) -> None:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(config=SlackConfig(bot_token="xoxb-test", api_url=fake.api_url))
        try:
            fake.answer_error("chat.postMessage", error)
            with pytest.raises(DeliveryError) as caught:
                await adapter.send(
                    ConversationKey(platform="slack", chat_id="CGEN"),
                    OutboundMessage(text="hello"),
                )
            assert isinstance(caught.value, Undeliverable if permanent else DeliveryFailed)
            assert caught.value.reason == error
        finally:
            await adapter.stop()


async def test_slack_network_failure_is_transient() -> None:
    adapter = SlackAdapter(config=SlackConfig(bot_token="xoxb-test", api_url="http://127.0.0.1:9/"))
    try:
        with pytest.raises(DeliveryFailed):
            await adapter.send(
                ConversationKey(platform="slack", chat_id="CGEN"), OutboundMessage(text="hello")
            )
    finally:
        await adapter.stop()


def test_bolt_does_not_warn_about_the_token_our_client_carries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    with caplog.at_level(logging.DEBUG):
        adapter = SlackAdapter(config=SlackConfig(bot_token="xoxb-from-the-environment"))
    assert adapter.app.client.token == "xoxb-from-the-environment"
    bolt = [r for r in caplog.records if r.name.startswith("slack_bolt")]
    assert [r.getMessage() for r in bolt if r.levelno >= logging.WARNING] == []
    # Only that one line is dropped, and only while the app is built.
    assert not logging.getLogger("slack_bolt.AsyncApp").filters
