"""Real payloads, replayed: Slack request bodies and Telegram updates from the public test
suites of bot frameworks (tests/corpus/, each file naming its source) go through Parley's
real adapters — Telegram through the webhook route and through long polling, Slack as
signed HTTP requests through Bolt — into the real inbox on Redis.

Each payload falls in a class that says what a person would expect: queued with the right
conversation and text, answered at the edge with a short note, or ignored quietly. Never a
5xx, never a reply to a bot or a service message; a payload no class covers fails the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
import redis.asyncio as aioredis
from telegram import Bot, Update

from adapters.base import Inbound, InboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from adapters.slack import inbound as slack_adapter
from adapters.telegram import TelegramAdapter, TelegramConfig
from adapters.telegram import inbound as telegram_inbound
from adapters.telegram import ingress as telegram_ingress
from bot.ops.http import HttpServer
from bot.runtime.inbox import Inbox, decode
from bot.runtime.keys import Keys
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import BOT_ID, BOT_USERNAME, FakeTelegram
from tests.helpers import until

CORPUS = Path(__file__).parent.parent / "corpus"
WEBHOOK_SECRET = "corpus-secret"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
MAX_CHARS = 4000


@dataclass(frozen=True)
class Case:
    name: str  # file#index, to find the payload again
    payload: dict[str, Any]


@dataclass(frozen=True)
class Expected:
    why: str  # the payload's class, in a person's words
    queued: dict[str, Any] | None = None  # fields of the one event it queues
    reply: str | None = None  # what Parley answers at the edge, in the same chat
    status: int = 200


def cases(platform: str) -> list[Case]:
    found = []
    for path in sorted(p for p in (CORPUS / platform).iterdir() if p.suffix == ".json"):
        doc = json.loads(path.read_text())
        assert doc["_source"]["repository"] and doc["_source"]["path"], path
        for index, payload in enumerate(doc["payloads"]):
            found.append(Case(f"{path.name}#{index}", payload))
    return found


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    telegram, slack = cases("telegram"), cases("slack")
    assert len(telegram) + len(slack) >= 150
    kinds = {k for c in telegram for k in c.payload if k not in ("update_id", "_source_path")}
    assert {
        "message",
        "edited_message",
        "channel_post",
        "business_message",
        "callback_query",
        "inline_query",
        "chosen_inline_result",
        "chat_member",
        "my_chat_member",
        "poll_answer",
        "shipping_query",
        "pre_checkout_query",
        "message_reaction",
    } <= kinds
    messages = [c.payload["message"] for c in telegram if "message" in c.payload]
    for field in (
        "caption",
        "photo",
        "document",
        "sticker",
        "voice",
        "location",
        "contact",
        "poll",
        "dice",
        "reply_to_message",
        "via_bot",
        "sender_chat",
        "is_topic_message",
        "pinned_message",
        "new_chat_members",
        "left_chat_member",
        "message_auto_delete_timer_changed",
        "chat_background_set",
        "migrate_to_chat_id",
    ):
        assert any(field in m for m in messages), field
    events = {
        (c.payload["event"].get("type"), c.payload["event"].get("subtype"))
        for c in slack
        if isinstance(c.payload.get("event"), dict)
    }
    for kind in (
        ("app_mention", None),
        ("message", None),
        ("message", "bot_message"),
        ("message", "message_changed"),
        ("message", "message_deleted"),
        ("message", "thread_broadcast"),
        ("message", "file_share"),
        ("message", "channel_join"),
        ("message", "me_message"),
        ("app_home_opened", None),
        ("reaction_added", None),
        ("member_joined_channel", None),
        ("assistant_thread_started", None),
    ):
        assert kind in events, kind
    types = {c.payload.get("type") for c in slack}
    assert {"url_verification", "block_actions", "view_submission", "shortcut"} <= types
    assert any("command" in c.payload and "type" not in c.payload for c in slack)
    assert any((c.payload.get("event") or {}).get("user") == slack_adapter.SLACKBOT for c in slack)


# --- Telegram -------------------------------------------------------------------------------

# Update kinds Parley does not act on, each with the reason a person would give.
TELEGRAM_IGNORED = {
    "edited_message": "an edit of an earlier message",
    "channel_post": "a post in a channel",
    "edited_channel_post": "an edit in a channel",
    "business_connection": "business account traffic: Parley has no business connection",
    "business_message": "business account traffic: Parley has no business connection",
    "edited_business_message": "business account traffic: Parley has no business connection",
    "deleted_business_messages": "business account traffic: Parley has no business connection",
    "guest_message": "a message to a bot Parley does not run",
    "managed_bot": "a bot Parley does not manage",
    "inline_query": "inline mode, which Parley does not offer",
    "chosen_inline_result": "inline mode, which Parley does not offer",
    "shipping_query": "payments, which Parley does not take",
    "pre_checkout_query": "payments, which Parley does not take",
    "purchased_paid_media": "payments, which Parley does not take",
    "poll": "a poll's state",
    "poll_answer": "a vote in a poll",
    "my_chat_member": "a change of Parley's membership",
    "chat_member": "a change of someone's membership",
    "chat_join_request": "a request to join a chat",
    "chat_boost": "a boost",
    "removed_chat_boost": "a boost",
    "message_reaction": "a reaction",
    "message_reaction_count": "reactions",
    "new_update_kind": "an update kind Telegram may add later",
    "key": "an update kind Telegram may add later",
}
# What a person sends besides text; a message with none of these and no text is a service
# message (a pin, members joining, a new timer or wallpaper, a forum topic opening, …).
TELEGRAM_CONTENT = {
    "animation",
    "audio",
    "contact",
    "dice",
    "document",
    "game",
    "invoice",
    "live_photo",
    "location",
    "passport_data",
    "photo",
    "paid_media",
    "poll",
    "sticker",
    "story",
    "venue",
    "video",
    "video_note",
    "voice",
    "checklist",
}
GROUP_ANONYMOUS_BOT = 1087968824


_BOT = Bot("1:corpus")  # only to parse with


def _readable(update: dict[str, Any]) -> bool:
    """Whether python-telegram-bot, which Parley builds on, can read the update at all."""
    try:
        Update.de_json(update, _BOT)
    except Exception:
        return False
    return True


def telegram_expected(update: dict[str, Any]) -> Expected:
    kinds = [k for k in update if k not in ("update_id", "_source_path")]
    assert len(kinds) == 1, f"an update with {kinds}"
    kind = kinds[0]
    if not _readable(update):
        return Expected("not a Bot API update this library can read", status=400)
    if kind == "callback_query":
        return Expected("a button that is not Parley's: answered as no longer active")
    if kind != "message":
        assert kind in TELEGRAM_IGNORED, f"unclassified update kind {kind!r}"
        return Expected(TELEGRAM_IGNORED[kind])
    return _telegram_message(update)


def _telegram_message(update: dict[str, Any]) -> Expected:
    message = update["message"]
    chat, sender, by_chat = message["chat"], message.get("from"), message.get("sender_chat")
    if by_chat is not None:
        if message.get("is_automatic_forward"):
            return Expected("a channel post Telegram forwarded into its discussion group")
        actor = str(by_chat["id"])  # an anonymous admin, or someone writing as a channel
    elif sender is None:
        return Expected("a message with no sender to answer")
    elif sender["is_bot"]:
        return Expected("a message from a bot")
    else:
        actor = str(sender["id"])
    text = message.get("text") or message.get("caption") or ""
    if not text and not TELEGRAM_CONTENT & set(message):
        return Expected("a service message")
    direct = chat["type"] == "private"
    command = _telegram_command(message.get("text") or "", direct)
    handle = f"@{BOT_USERNAME}"
    reply_to = (message.get("reply_to_message") or {}).get("from") or {}
    addressed = (
        direct or command is not None or handle in text.lower() or (reply_to.get("id") == BOT_ID)
    )
    if not addressed:
        return Expected("group chatter not addressed to Parley")
    conversation = {
        "chat_id": str(chat["id"]),
        "thread_id": str(message["message_thread_id"]) if message.get("is_topic_message") else None,
    }
    if command is not None:
        name, args = command
        return Expected(
            "a command for Parley",
            queued={"conversation": conversation, "actor": actor, "command": name, "args": args},
        )
    words = text.replace(handle, "").strip() if handle in text.lower() else text.strip()
    replied = message.get("reply_to_message") or {}
    if not words and _files(message) + _files(replied) == 0 and not replied.get("text"):
        kind = "non_text" if message.get("text") is None else "bare_mention"
        return Expected(
            "an attachment with nothing to read" if kind == "non_text" else "a bare mention",
            queued={"conversation": conversation, "actor": actor, "text": "", "kind": kind},
        )
    if not words:
        return Expected(
            "a photo or file for Parley to read",
            queued={"conversation": conversation, "actor": actor, "text": "", "command": None},
        )
    if len(words) > MAX_CHARS:
        return Expected(
            "an over-long message",
            queued={
                "conversation": conversation,
                "actor": actor,
                "text": words[:MAX_CHARS],
                "kind": "too_long",
                "length": len(words),
            },
        )
    return Expected(
        "a message for Parley",
        queued={"conversation": conversation, "actor": actor, "text": words, "command": None},
    )


def _files(message: dict[str, Any]) -> int:
    """Photos and documents reach the model as files (their content is checked later); voice
    notes, audio files and video notes are transcribed."""
    spoken = sum(int(bool(message.get(kind))) for kind in ("voice", "audio", "video_note"))
    return int(bool(message.get("photo"))) + int("document" in message) + spoken


def _telegram_command(text: str, direct: bool) -> tuple[str, str] | None:
    if not text.startswith("/"):
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.partition("@")
    if not name or (target and target.lower() != BOT_USERNAME):
        return None
    if not direct and not target and name.lower() not in telegram_inbound.COMMANDS:
        return None  # a bare command in a group may be another bot's
    return name.lower(), args.strip()


def test_every_telegram_payload_is_classified() -> None:
    classes: dict[str, int] = {}
    for case in cases("telegram"):
        expected = telegram_expected(case.payload)
        classes[expected.why] = classes.get(expected.why, 0) + 1
    # The replay means something only if it exercises each outcome.
    assert classes["a message for Parley"] >= 10
    assert classes["a service message"] >= 20
    assert classes["group chatter not addressed to Parley"] >= 10
    assert classes["an attachment with nothing to read"] >= 3
    assert classes["a photo or file for Parley to read"] >= 2


VIEWING_NOTE = re.compile(r"\n\n\(I am looking at the channel <#[A-Z0-9]+>\.\)$")


def _check_queued(case: Case, expected: Expected, event: Inbound) -> None:
    assert expected.queued is not None, f"{case.name}: {expected.why}, but queued {event}"
    assert isinstance(event, InboundMessage), case.name
    want = expected.queued
    got = {
        "conversation": {
            "chat_id": event.conversation.chat_id,
            "thread_id": event.conversation.thread_id,
        },
        "actor": event.actor.user_id,
        "command": event.command,
    }
    if "text" in want:
        # In Slack's assistant view the channel the user looks at rides along as a note.
        got["text"] = VIEWING_NOTE.sub("", event.text)
    if "args" in want:
        got["args"] = event.args
    if "team_id" in want:
        got["team_id"] = event.conversation.team_id
    if "mentioned" in want:
        got["mentioned"] = event.mentioned
    if "kind" in want:
        got["kind"] = event.kind
    if "length" in want:
        got["length"] = event.length
    if "command" not in want:
        del got["command"]
    assert got == want, f"{case.name} ({expected.why})"


async def _inbox_events(redis: aioredis.Redis) -> list[Inbound]:
    entries = await redis.xrange(Keys().inbox)
    return [decode(fields[b"event"]) for _, fields in entries]


@contextlib.asynccontextmanager
async def telegram_bot(
    redis: aioredis.Redis, fake: FakeTelegram
) -> AsyncIterator[tuple[TelegramAdapter, str]]:
    adapter = TelegramAdapter(
        config=TelegramConfig(
            open_access=True,
            token=fake.token,
            api_url=fake.url,
            poll_timeout=1,
            webhook_secret=WEBHOOK_SECRET,
            max_message_chars=MAX_CHARS,
        )
    )
    adapter.handler = Inbox(redis, Keys(), dedup_ttl=600).submit
    await adapter.initialize()
    server = HttpServer("127.0.0.1", 0)
    server.add_route(*adapter.webhook_route())
    await server.start()
    try:
        yield adapter, f"http://127.0.0.1:{server.port}/telegram/webhook"
    finally:
        await server.stop()
        await adapter.stop()


def _numbered(all_cases: list[Case]) -> Iterator[tuple[Case, dict[str, Any]]]:
    """Each payload with a fresh update id, so deduplication keeps them apart."""
    for number, case in enumerate(all_cases, 1):
        update = {k: v for k, v in copy.deepcopy(case.payload).items() if k != "_source_path"}
        update["update_id"] = 10_000 + number
        yield case, update


async def test_telegram_corpus_through_the_webhook(
    redis, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async with telegram_bot(redis, telegram) as (_, url), aiohttp.ClientSession() as http:
        for case, update in _numbered(cases("telegram")):
            expected = telegram_expected(update)
            before_queue = await redis.xlen(Keys().inbox)
            before_posts = len(telegram.posted)
            before_answers = len(telegram.method_calls("answerCallbackQuery"))
            response = await http.post(
                url,
                data=json.dumps(update),
                headers={
                    "Content-Type": "application/json",
                    telegram_ingress.SECRET_HEADER: WEBHOOK_SECRET,
                },
            )
            assert response.status == expected.status, f"{case.name}: {expected.why}"
            queued = (await _inbox_events(redis))[before_queue:]
            posts = telegram.posted[before_posts:]
            if expected.queued is not None:
                assert len(queued) == 1, f"{case.name}: {expected.why}"
                _check_queued(case, expected, queued[0])
            else:
                assert queued == [], f"{case.name}: {expected.why}"
            if expected.reply is not None:
                assert len(posts) == 1, f"{case.name}: {expected.why}"
                assert posts[0].chat_id == update["message"]["chat"]["id"]
                assert posts[0].text.startswith(expected.reply), case.name
            else:
                assert posts == [], f"{case.name}: {expected.why}, but answered {posts}"
            answers = len(telegram.method_calls("answerCallbackQuery")) - before_answers
            assert answers == (1 if "button" in expected.why else 0), case.name
    assert not _errors(caplog)


async def test_telegram_corpus_through_long_polling(
    redis, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    # An update the library cannot read breaks a whole getUpdates batch; the webhook replay
    # covers those (400), so polling replays the readable ones.
    numbered = [(c, u) for c, u in _numbered(cases("telegram")) if _readable(u)]
    async with telegram_bot(redis, telegram) as (adapter, _):
        await adapter.start_polling()
        for _, update in numbered:
            telegram.push(update)
        last = numbered[-1][1]["update_id"]
        await until(lambda: _polled_past(telegram, last), within=60)
    by_id = {f"tg:{u['update_id']}": (c, telegram_expected(u)) for c, u in numbered}
    queued = await _inbox_events(redis)
    for event in queued:
        case, expected = by_id[event.event_id]
        _check_queued(case, expected, event)
    want_queued = {key for key, (_, expected) in by_id.items() if expected.queued is not None}
    assert {e.event_id for e in queued} == want_queued
    want_replies = sorted(
        (u["message"]["chat"]["id"], expected.reply)
        for c, u in numbered
        if (expected := telegram_expected(u)).reply is not None
    )
    replies = sorted(
        (p.chat_id, next(r for _, r in want_replies if p.text.startswith(r)))
        for p in telegram.posted
    )
    assert replies == want_replies
    assert not _errors(caplog)


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log lines at ERROR or with a traceback: the replay must produce none."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def _polled_past(fake: FakeTelegram, update_id: int) -> bool:
    return any(
        int(call.body.get("offset") or 0) > update_id for call in fake.method_calls("getUpdates")
    )


# --- Slack ----------------------------------------------------------------------------------

# Event types Parley does not act on, each with the reason a person would give.
SLACK_IGNORED_EVENTS = {
    "app_home_opened": "someone opened Parley's home tab",
    "assistant_thread_started": "an assistant thread opened (Parley uses agent messaging)",
    "assistant_thread_context_changed": "an assistant thread's context changed",
    "reaction_added": "a reaction",
    "member_joined_channel": "someone joined a channel",
    "member_left_channel": "someone left a channel",
    "pin_added": "a pin",
    "pin_removed": "a pin",
    "file_shared": "a file event (its message comes separately)",
    "file_public": "a file event (its message comes separately)",
    "file_deleted": "a file event (its message comes separately)",
    "app_installed": "an install event",
    "app_uninstalled": "an install event",
    "app_uninstalled_team": "an install event",
    "app_deleted": "an install event",
    "tokens_revoked": "an install event",
    "team_access_granted": "an install event",
    "team_access_revoked": "an install event",
    "grid_migration_started": "a workspace event",
    "email_domain_changed": "a workspace event",
    "emoji_changed": "a workspace event",
    "user_change": "a workspace event",
    "user_profile_changed": "a workspace event",
    "channel_shared": "a channel event",
    "channel_unshared": "a channel event",
    "channel_history_changed": "a channel event",
    "group_history_changed": "a channel event",
    "im_history_changed": "a channel event",
    "sh_room_join": "a huddle event",
    "sh_room_leave": "a huddle event",
    "sh_room_update": "a huddle event",
    "call_rejected": "a call event",
    "message_metadata_posted": "message metadata",
    "message_metadata_updated": "message metadata",
    "message_metadata_deleted": "message metadata",
    "entity_details_requested": "a work object preview another app offers",
    "function_executed": "a workflow function Parley does not define",
    "workflow_step_execute": "a workflow step Parley does not define",
}
SLACK_INTERACTIVE = {
    "block_actions",
    "block_suggestion",
    "dialog_submission",
    "interactive_message",
    "message_action",
    "shortcut",
    "view_closed",
    "view_submission",
}
SLACK_USER_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}


def slack_expected(payload: dict[str, Any]) -> Expected:
    kind = payload.get("type")
    if kind is None and "command" in payload:
        if payload["command"] != "/parley":
            return Expected("another app's slash command")
        words = str(payload.get("text") or "").strip()
        name, _, args = words.partition(" ")
        return Expected(
            "a /parley command",
            queued={
                "conversation": {"chat_id": payload["channel_id"], "thread_id": None},
                "actor": payload["user_id"],
                "command": (name or "help").lower(),
                "args": args.strip(),
            },
        )
    if kind == "url_verification":
        return Expected("Slack checking the events URL")
    if kind == "app_rate_limited":
        return Expected("Slack saying the app is rate limited")
    if kind == "block_actions":
        if not payload.get("actions"):
            return Expected("a button press with no button in it", status=400)
        return Expected("a press of another app's button")
    if kind in SLACK_INTERACTIVE:
        return Expected("a modal, shortcut or legacy attachment, which Parley never shows")
    assert kind == "event_callback", f"unclassified Slack payload type {kind!r}"
    event = payload.get("event")
    if not isinstance(event, dict):
        return Expected("an envelope with no event", status=400)
    if not isinstance(event.get("type"), str):
        return Expected("an event with no type", status=400)
    team = payload.get("team_id") or event.get("team")
    if event.get("type") == "app_mention":
        return _slack_message(event, team, mentioned=True)
    if event.get("type") == "message":
        if event.get("subtype") not in SLACK_USER_SUBTYPES:
            return Expected("a notice about a message, not one a person wrote")
        mention = f"<@{fs.BOT_USER}>"
        if event.get("channel_type") == "im":
            return _slack_message(event, team, mentioned=True, direct=True)
        if event.get("thread_ts") and mention not in str(event.get("text") or ""):
            return _slack_message(event, team, mentioned=False)
        return Expected("channel chatter (a mention comes as app_mention)")
    if event.get("type") == "app_home_opened" and event.get("tab") == "messages":
        user, channel = event.get("user"), event.get("channel")
        if isinstance(user, str) and user and isinstance(channel, str) and channel:
            return Expected(
                "the Messages tab opened: greeted once, by the engine",
                queued={
                    "conversation": {"chat_id": channel, "thread_id": None},
                    "actor": user,
                    "text": "",
                    "kind": "opened",
                },
            )
    reason = SLACK_IGNORED_EVENTS.get(event["type"])
    assert reason is not None, f"unclassified Slack event {event.get('type')!r}"
    return Expected(reason)


def _slack_message(
    event: dict[str, Any], team: str | None, *, mentioned: bool, direct: bool = False
) -> Expected:
    if event.get("bot_id"):
        return Expected("a bot's message")
    user = event.get("user")
    if user == slack_adapter.SLACKBOT:
        return Expected("a Slackbot notice")
    if not user or user == fs.BOT_USER:
        return Expected("a message with no person behind it")
    if not event.get("channel") or not event.get("ts"):
        return Expected("a message with nowhere to answer")
    words = str(event.get("text") or "").replace(f"<@{fs.BOT_USER}>", "").strip()
    thread = event.get("thread_ts") or (None if direct else event["ts"])
    where = {"chat_id": event["channel"], "thread_id": thread}
    if not words:
        if not mentioned:
            return Expected("an empty thread reply")
        kind = "non_text" if event.get("files") else "bare_mention"
        return Expected(
            "a bare mention or a file with no comment",
            queued={"conversation": where, "actor": user, "text": "", "kind": kind},
        )
    if len(words) > MAX_CHARS:
        return Expected(
            "an over-long message",
            queued={
                "conversation": where,
                "actor": user,
                "text": words[:MAX_CHARS],
                "kind": "too_long",
                "length": len(words),
            },
        )
    return Expected(
        "a message for Parley" if mentioned else "a thread reply, Parley's if the thread is",
        queued={
            "conversation": {"chat_id": event["channel"], "thread_id": thread},
            "actor": user,
            "command": None,
            "text": words,
            "team_id": team,
            "mentioned": mentioned,
        },
    )


def test_every_slack_payload_is_classified() -> None:
    classes: dict[str, int] = {}
    for case in cases("slack"):
        expected = slack_expected(case.payload)
        classes[expected.why] = classes.get(expected.why, 0) + 1
    assert classes["a message for Parley"] >= 20
    assert classes["a notice about a message, not one a person wrote"] >= 20
    assert classes["a modal, shortcut or legacy attachment, which Parley never shows"] >= 20
    assert classes["a press of another app's button"] >= 5
    assert classes["a Slackbot notice"] >= 1


@contextlib.asynccontextmanager
async def slack_app(redis: aioredis.Redis) -> AsyncIterator[tuple[FakeSlack, SlackAdapter, str]]:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="xoxb-corpus",
                signing_secret=SLACK_SECRET,
                api_url=fake.api_url,
                max_message_chars=MAX_CHARS,
            )
        )
        adapter.handler = Inbox(redis, Keys(), dedup_ttl=600).submit
        await adapter.initialize()
        server = HttpServer("127.0.0.1", 0)
        server.add_route(*adapter.slack_route())
        await server.start()
        try:
            yield fake, adapter, f"http://127.0.0.1:{server.port}/slack/events"
        finally:
            await server.stop()
            await adapter.stop()


def slack_request(payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The body and signed headers Slack would send for a payload."""
    kind = payload.get("type")
    if isinstance(kind, str) and kind in SLACK_INTERACTIVE:
        body = urlencode({"payload": json.dumps(payload)}).encode()
        kind = "application/x-www-form-urlencoded"
    elif kind is None and "command" in payload:
        body = urlencode(payload).encode()
        kind = "application/x-www-form-urlencoded"
    else:
        body, kind = json.dumps(payload).encode(), "application/json"
    return body, fs.signed(SLACK_SECRET, body, content_type=kind)


async def test_slack_corpus_through_signed_requests(
    redis, caplog: pytest.LogCaptureFixture
) -> None:
    expectations: dict[str, tuple[Case, Expected]] = {}
    replies: list[tuple[str, str | None, str]] = []
    async with slack_app(redis) as (fake, _, url), aiohttp.ClientSession() as http:
        for number, case in enumerate(cases("slack"), 1):
            payload = copy.deepcopy(case.payload)
            if "event_id" in payload:
                payload["event_id"] = f"EvREPLAY{number:05d}"  # so deduplication keeps them apart
            expected = slack_expected(payload)
            body, headers = slack_request(payload)
            response = await http.post(url, data=body, headers=headers)
            assert response.status == expected.status, f"{case.name}: {expected.why}"
            if payload.get("type") == "url_verification":
                assert payload["challenge"] in await response.text()
            if expected.queued is not None:
                key = f"slack:{payload['event_id']}" if "event_id" in payload else ""
                key = key or f"slack:command:{payload['trigger_id']}"
                expectations[key] = (case, expected)
            if expected.reply is not None:
                event = payload["event"]
                if "assistant_thread" in event:  # greeted in the assistant thread itself
                    opened = event["assistant_thread"]
                    replies.append((opened["channel_id"], opened["thread_ts"], expected.reply))
                    continue
                thread = event.get("thread_ts") or (
                    None if event.get("channel_type") == "im" else event["ts"]
                )
                replies.append((event["channel"], thread, expected.reply))

        async def queued() -> list[Inbound]:
            return await _inbox_events(redis)

        # Bolt acknowledges before its listener runs: wait for everything expected to land.
        deadline = time.monotonic() + 30
        while True:
            events = await queued()
            if {e.event_id for e in events} >= set(expectations) and len(fake.posts) >= len(
                replies
            ):
                break
            assert time.monotonic() < deadline, "timed out waiting for the queue"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # and give anything unexpected the chance to show
        events = await queued()
        posts = sorted((p.channel, p.thread_ts, p.text) for p in fake.posts)
    assert sorted(e.event_id for e in events) == sorted(expectations)
    for event in events:
        case, expected = expectations[event.event_id]
        _check_queued(case, expected, event)
    assert len(posts) == len(replies)
    for (channel, thread, text), (want_channel, want_thread, want) in zip(
        posts, sorted(replies), strict=True
    ):
        assert (channel, thread) == (want_channel, want_thread) and text.startswith(want)
    assert not _errors(caplog)
