"""A message as long as its platform lets anyone send is answered: Telegram's 4,096 characters,
Slack's 40,000. Built on corpus payloads, through the real adapters and runtime; an operator's
own PARLEY_MAX_MESSAGE_CHARS still refuses longer ones, naming the limit."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.adapters.test_corpus_findings import corpus
from tests.adapters.test_slack import slack_bot
from tests.adapters.test_telegram import ANA, bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import slack as fs
from tests.fakes.telegram import FakeTelegram


def telegram_text(text: str) -> dict[str, object]:
    """A corpus group message, made a private text message from Ana."""
    update = corpus("telegram", "tgbot__src_types_tests_snapshots_message.json#63")
    message = update["message"]
    del message["pinned_message"]
    message["chat"] = {"id": ANA, "type": "private", "first_name": "Ana"}
    message["from"] = {"id": ANA, "is_bot": False, "first_name": "Ana"}
    message["text"] = text
    return update


async def test_a_telegram_text_of_the_maximum_length_is_answered(redis: aioredis.Redis) -> None:
    longest = ("word " * 820)[:4096]
    assert len(longest) == 4096
    model = ScriptedModel([reply("Read it all.")])
    async with FakeTelegram() as telegram, bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram_text(longest))
        await until(lambda: len(telegram.chat(ANA)) == 1, within=15)
        await harness.settle()
    assert telegram.chat(ANA)[0].text == "Read it all."
    assert model.turn_requests[0].messages[-1].text == longest.strip()


async def test_slacks_maximum_is_answered_and_an_operators_cap_is_stated(
    redis: aioredis.Redis,
) -> None:
    dm = corpus(
        "slack",
        "bolt-python__tests_slack_bolt_middleware_attaching_conversation_kwargs"
        "_test_attaching_conversation_kwargs.json#2",
    )["event"]
    assert dm["channel_type"] == "im"
    channel = dm["channel"]
    longest = "x" * 40_000
    model = ScriptedModel([reply("All forty thousand.")])
    async with slack_bot(redis, model) as s:
        await s.event({**dm, "text": longest, "files": []})
        await until(lambda: len(s.fake.in_channel(channel)) == 1, within=15)
        await s.harness.settle()
    assert s.fake.in_channel(channel)[0].body == "All forty thousand."
    assert model.turn_requests[0].messages[-1].text == longest
    capped = {"agent": {"PARLEY_MAX_MESSAGE_CHARS": "1000"}}
    async with slack_bot(redis, ScriptedModel([]), settings=capped, max_message_chars=1000) as s:
        await s.event(fs.dm_event("UANA", "y" * 1500))
        await until(lambda: len(s.fake.in_channel("DANA")) == 1, within=15)
        await s.harness.settle()
    assert s.fake.in_channel("DANA")[0].body == (
        "That message is too long for me (1,500 characters; my limit is 1,000). "
        "Could you shorten it or split it up?"
    )
