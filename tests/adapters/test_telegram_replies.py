"""In a Telegram group Parley's answer replies to the message that asked (`reply_parameters`),
so it is clear whom it answers; in a private chat there is nobody else to tell apart."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from tests.adapters.test_telegram import ANA, GROUP, bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram


async def test_a_group_answer_replies_to_the_message_that_asked(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("Ten o'clock."), reply("Hi Ana.")])
    async with FakeTelegram() as telegram, bot(redis, telegram, model) as (harness, _):
        asked = telegram.message(
            chat_id=GROUP, user_id=ANA, text=f"@{BOT_USERNAME} when is stand-up?", chat_type="group"
        )
        telegram.push(asked)
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hello"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    in_group, in_private = telegram.method_calls("sendMessage")
    quoted = json.loads(in_group.body["reply_parameters"])
    assert quoted["message_id"] == asked["message"]["message_id"]
    assert quoted["allow_sending_without_reply"] is True  # a deleted question still gets it
    assert "reply_parameters" not in in_private.body
