"""What replaying the corpus found, one test each, built on the corpus payloads: a caption
that mentions Parley, an anonymous admin, service messages in a private chat, a command for
another bot, a bare mention, Slackbot's notices, a thread reply also sent to the channel,
mistyped fields, a non-numeric timestamp, and how refused requests are logged."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from adapters.base import InboundMessage
from adapters.telegram import ingress as telegram_ingress
from bot.runtime.keys import Keys
from tests.adapters.test_corpus import (
    WEBHOOK_SECRET,
    _inbox_events,
    cases,
    slack_app,
    slack_request,
    telegram_bot,
    until,
)
from tests.adapters.test_slack import slack_bot
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import slack as fs
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram

MENTION = f"@{BOT_USERNAME}"


def corpus(platform: str, name: str) -> dict[str, Any]:
    """A corpus payload by its file#index name, as a fresh copy."""
    found = next(c for c in cases(platform) if c.name == name)
    return copy.deepcopy({k: v for k, v in found.payload.items() if k != "_source_path"})


def mentioning(message: dict[str, Any], field: str, words: str) -> None:
    """Make a message address Parley: `@parley_bot words` in its text or caption."""
    message[field] = f"{MENTION} {words}"
    message[f"{'caption_' if field == 'caption' else ''}entities"] = [
        {"type": "mention", "offset": 0, "length": len(MENTION)}
    ]


async def post_update(url: str, update: dict[str, Any]) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            url,
            data=json.dumps(update),
            headers={
                "Content-Type": "application/json",
                telegram_ingress.SECRET_HEADER: WEBHOOK_SECRET,
            },
        ) as response,
    ):
        return response.status


# --- Telegram -------------------------------------------------------------------------------


async def test_a_caption_that_mentions_parley_on_a_photo_in_a_group_is_its_text(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    update = corpus("telegram", "tgbot__src_types_tests_message.json#8")  # a photo in a group
    message = update["message"]
    assert message["chat"]["type"] == "supergroup" and "photo" in message
    mentioning(message, "caption", "what is on this receipt?")
    async with telegram_bot(redis, telegram) as (_, url):
        assert await post_update(url, update) == 200
        [event] = await _inbox_events(redis)
    assert isinstance(event, InboundMessage)
    assert event.text == "what is on this receipt?"
    assert event.conversation.chat_id == str(message["chat"]["id"])
    assert telegram.posted == []


async def test_a_photo_alone_is_taken_to_read_and_a_sticker_is_handed_over_as_non_text(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    update = corpus("telegram", "tgbot__src_types_tests_message.json#8")
    message = update["message"]
    message["chat"] = {"id": 42, "type": "private", "first_name": "Ana"}
    del message["caption"]
    sticker = {
        "update_id": update["update_id"] + 1,
        "message": {
            **{k: v for k, v in message.items() if k != "photo"},
            "message_id": message["message_id"] + 1,
            "sticker": {
                "file_id": "s1",
                "file_unique_id": "u1",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
            },
        },
    }
    async with telegram_bot(redis, telegram) as (_, url):
        assert await post_update(url, update) == 200
        assert await post_update(url, sticker) == 200
        [event, note] = await _inbox_events(redis)
    assert isinstance(event, InboundMessage) and event.text == ""
    assert [a.name for a in event.attachments] == ["photo.jpg"] and event.kind == "text"
    assert isinstance(note, InboundMessage) and note.kind == "non_text"
    assert note.text == "" and note.attachments == ()
    assert telegram.posted == []  # the adapter says nothing itself


async def test_an_anonymous_admin_who_mentions_parley_is_answered(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    # A message from GroupAnonymousBot on behalf of the group itself.
    update = corpus("telegram", "teloxide__crates_teloxide-core_src_types_message.json#6")
    message = update["message"]
    assert message["from"]["username"] == "GroupAnonymousBot" and message["from"]["is_bot"]
    mentioning(message, "text", "summarise today's thread")
    async with telegram_bot(redis, telegram) as (_, url):
        assert await post_update(url, update) == 200
        [event] = await _inbox_events(redis)
    assert isinstance(event, InboundMessage)
    assert event.text == "summarise today's thread"
    assert event.conversation.chat_id == str(message["chat"]["id"])
    assert event.actor.user_id == str(message["sender_chat"]["id"])
    assert event.actor.name == message["sender_chat"]["title"]


@pytest.mark.parametrize(
    "name",
    [
        "tgbot__src_types_tests_snapshots_message.json#63",  # pinned_message
        "tgbot__src_types_tests_snapshots_message.json#3",  # message_auto_delete_timer_changed
        "tgbot__src_types_tests_snapshots_message.json#7",  # chat_background_set
    ],
)
async def test_service_messages_in_a_private_chat_are_ignored_silently(
    redis: aioredis.Redis, telegram: FakeTelegram, name: str
) -> None:
    update = corpus("telegram", name)
    message = update["message"]
    assert not (message.get("text") or message.get("caption"))
    message["chat"] = {"id": 42, "type": "private", "first_name": "Ana"}
    async with telegram_bot(redis, telegram) as (_, url):
        assert await post_update(url, update) == 200
        assert await _inbox_events(redis) == []
    assert telegram.posted == []


async def test_in_a_group_only_parleys_commands_count(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    group_text = "tgbot__src_types_tests_snapshots_message.json#63"
    texts = ["/report", "/report@other_bot spam", f"/report@{BOT_USERNAME} spam", "/help"]
    async with telegram_bot(redis, telegram) as (_, url):
        for number, text in enumerate(texts):
            update = corpus("telegram", group_text)
            message = update["message"]
            del message["pinned_message"]
            message["text"] = text
            update["update_id"] = 500 + number
            assert await post_update(url, update) == 200
        events = await _inbox_events(redis)
    assert [(e.command, e.args) for e in events if isinstance(e, InboundMessage)] == [
        ("report", "spam"),
        ("help", ""),
    ]
    assert telegram.posted == []


async def test_a_bare_mention_is_handed_over_as_one_not_as_an_objective(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    update = corpus("telegram", "tgbot__src_types_tests_message.json#8")
    message = update["message"]
    del message["photo"], message["caption"]
    mentioning(message, "text", "")
    async with telegram_bot(redis, telegram) as (_, url):
        assert await post_update(url, update) == 200
        [event] = await _inbox_events(redis)
    assert isinstance(event, InboundMessage)
    assert (event.kind, event.text, event.is_direct) == ("bare_mention", "", False)
    assert telegram.posted == []  # the adapter says nothing itself


# --- Slack ----------------------------------------------------------------------------------


async def _send(url: str, payload: dict[str, Any], **headers: str) -> aiohttp.ClientResponse:
    body, signed = slack_request(payload)
    async with aiohttp.ClientSession() as http:
        response = await http.post(url, data=body, headers={**signed, **headers})
        await response.read()
        return response


async def test_slackbot_notices_in_a_dm_are_not_answered(redis: aioredis.Redis) -> None:
    notice = corpus("slack", "python-slack-sdk__tests_data_rtm.start.json#0")
    notice["event"]["text"] = "You have been removed from #launch by Ana"
    probe = corpus("slack", "python-slack-sdk__tests_data_rtm.start.json#0")
    probe["event"]["user"] = "UANA"  # the same DM from a person, so the test can wait on it
    probe["event_id"] = "EvPROBE"
    async with slack_app(redis) as (fake, _, url):
        assert (await _send(url, notice)).status == 200
        assert (await _send(url, probe)).status == 200
        await _wait_for_queue(redis, 1)
        events = await _inbox_events(redis)
    assert [e.event_id for e in events] == ["slack:EvPROBE"]
    assert fake.posts == []


async def _wait_for_queue(redis: aioredis.Redis, count: int) -> None:
    deadline = time.monotonic() + 20
    while await redis.xlen(Keys().inbox) < count:
        assert time.monotonic() < deadline, "timed out waiting for the queue"
        await asyncio.sleep(0.02)


async def test_a_thread_reply_also_sent_to_the_channel_is_answered(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("Started."), reply("Answered the broadcast reply.")])
    async with slack_bot(redis, model) as s:
        mention = fs.mention_event("UANA", "start a plan", channel="C111")
        await s.event(mention)
        await until(lambda: len(s.fake.in_channel("C111")) == 1, within=30)
        await s.harness.settle()
        broadcast = corpus(
            "slack", "bolt-python__tests_scenario_tests_async_test_message_thread_broadcast.json#0"
        )["event"]
        assert broadcast["subtype"] == "thread_broadcast" and broadcast["channel"] == "C111"
        broadcast["thread_ts"] = mention["ts"]  # a reply in Parley's own thread
        broadcast["root"]["ts"] = broadcast["root"]["thread_ts"] = mention["ts"]
        assert (await s.event(broadcast)).status == 200
        await until(lambda: len(s.fake.in_channel("C111")) == 2, within=30)
        await s.harness.settle()
        posts = s.fake.in_channel("C111")
    assert posts[1].body == "Answered the broadcast reply."
    assert posts[1].thread_ts == mention["ts"]
    assert model.turn_requests[1].messages[-1].text.strip() == "Hi there!"


async def test_a_bare_mention_or_a_file_with_no_comment_is_handed_over_as_such(
    redis: aioredis.Redis,
) -> None:
    mention = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")
    assert mention["event"]["type"] == "app_mention"
    mention["event"]["text"] = f"<@{fs.BOT_USER}>"
    upload = corpus(
        "slack",
        "bolt-python__tests_slack_bolt_middleware_attaching_conversation_kwargs"
        "_test_attaching_conversation_kwargs.json#2",
    )
    assert upload["event"]["subtype"] == "file_share" and upload["event"]["channel_type"] == "im"
    upload["event"]["text"] = ""  # uploaded with no comment
    async with slack_app(redis) as (fake, _, url):
        assert (await _send(url, mention)).status == 200
        assert (await _send(url, upload)).status == 200
        events = await _inbox_events(redis)
    assert fake.posts == []  # the adapter says nothing itself
    by_channel = {e.conversation.chat_id: e for e in events if isinstance(e, InboundMessage)}
    in_channel = by_channel[mention["event"]["channel"]]
    assert in_channel.conversation.thread_id == mention["event"]["ts"]
    assert (in_channel.kind, in_channel.text, in_channel.is_direct) == ("bare_mention", "", False)
    in_dm = by_channel["D111"]
    assert in_dm.conversation.thread_id is None
    assert (in_dm.kind, in_dm.text, in_dm.is_direct) == ("bare_mention", "", True)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("thread_ts", 1633663824.0005),
        ("channel", ["C111"]),
        ("user", {"id": "U111"}),
        ("text", 42),
        ("team_id", 7),
    ],
)
async def test_an_event_with_mistyped_fields_is_dropped_at_the_edge(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture, field: str, value: object
) -> None:
    mistyped = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")
    if field == "team_id":
        mistyped[field] = value
    else:
        mistyped["event"][field] = value
    probe = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")
    probe["event_id"] = "EvPROBE"
    with caplog.at_level(logging.WARNING, logger="adapters"):
        async with slack_app(redis) as (_, _, url):
            assert (await _send(url, mistyped)).status == 200
            assert (await _send(url, probe)).status == 200
            await _wait_for_queue(redis, 1)
            events = await _inbox_events(redis)
    assert [e.event_id for e in events] == ["slack:EvPROBE"]
    [warning] = [r for r in caplog.records if "mistyped" in r.getMessage()]
    assert field in warning.getMessage() and str(value) not in warning.getMessage()


async def test_a_non_numeric_timestamp_is_a_400_without_a_traceback(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    payload = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")
    with caplog.at_level(logging.DEBUG):
        async with slack_app(redis) as (_, _, url):
            for stamp in ("soon", "１２３", "1e9", ""):
                response = await _send(url, payload, **{"X-Slack-Request-Timestamp": stamp})
                assert response.status in (400, 401), stamp
                assert response.status == (401 if stamp == "" else 400), stamp
    assert not [r for r in caplog.records if r.exc_info]
    assert await redis.xlen(Keys().inbox) == 0


async def test_refused_requests_are_logged_as_one_bounded_line(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    forged = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")
    forged["event"]["text"] = "secret plans\n2026-11-23 INFO forged log line " + "x" * 1_000_000
    body, headers = slack_request(forged)
    headers["X-Slack-Signature"] = "v0=" + "0" * 64
    with caplog.at_level(logging.DEBUG):
        async with slack_app(redis) as (_, _, url), aiohttp.ClientSession() as http:
            async with http.post(url, data=body, headers=headers) as response:
                assert response.status == 401
            async with http.post(url, data=body, headers={"Content-Type": "text/plain"}) as bare:
                assert bare.status == 401
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 2
    for line in refused:
        assert "\n" not in line and len(line) < 300
        assert "secret plans" not in line and "forged" not in line
    everything = "".join(r.getMessage() for r in caplog.records)
    assert "secret plans" not in everything and len(everything) < 20_000
    assert await redis.xlen(Keys().inbox) == 0


async def test_a_press_of_parleys_button_with_mistyped_fields_is_dropped(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    press = corpus("slack", "bolt-python__tests_scenario_tests_async_test_block_actions.json#0")
    assert press["type"] == "block_actions"
    press["actions"][0]["action_id"] = "parley:approve"  # one of Parley's buttons
    press["actions"][0]["value"] = "d1:approve"
    press["user"]["id"] = 12345
    with caplog.at_level(logging.WARNING, logger="adapters"):
        async with slack_app(redis) as (_, _, url):
            assert (await _send(url, press)).status == 200
            await until(lambda: any("mistyped" in r.getMessage() for r in caplog.records))
        assert await _inbox_events(redis) == []


@pytest.mark.parametrize("shape", [["event_callback"], {"type": "event_callback"}, 7])
async def test_a_signed_payload_whose_type_is_not_a_string_is_a_400(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture, shape: object
) -> None:
    payload = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")
    payload["type"] = shape
    with caplog.at_level(logging.DEBUG):
        async with slack_app(redis) as (_, _, url):
            assert (await _send(url, payload)).status == 400
    assert not [r for r in caplog.records if r.exc_info]
    assert await redis.xlen(Keys().inbox) == 0
