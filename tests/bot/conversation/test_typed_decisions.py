"""A typed reply to a pending approval is read for what it means, on the real platforms.

A clear yes from someone who may decide approves (said back the way a press shows it, and
the approved call runs); a clear no rejects; anything else is a rejection with the text as
the reason. Someone who may not decide cannot approve by typing either.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.adapters.test_slack import RAN, slack_bot
from tests.adapters.test_telegram import ANA, BOB, GROUP, SENT, bot, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram


async def test_a_typed_yes_on_telegram_approves_and_the_tool_runs(redis: aioredis.Redis) -> None:
    SENT.clear()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])
    async with FakeTelegram() as telegram, bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=ANA, text=f"@{BOT_USERNAME} email Bo", chat_type="group"
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
        approval = telegram.chat(GROUP)[0]
        # Bob may not decide: his "yes" approves nothing.
        yes_from_bob = telegram.message(
            chat_id=GROUP, user_id=BOB, name="Bob", text="yes", chat_type="group", reply_to_bot=True
        )
        telegram.push(yes_from_bob)
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        assert "waiting for Ana" in telegram.chat(GROUP)[1].text and SENT == []
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=ANA, text="Yes, go ahead 👍", chat_type="group",
                reply_to_bot=True,
            )
        )  # fmt: skip
        await until(lambda: len(telegram.chat(GROUP)) == 4)
        await harness.settle()
    assert SENT == ["bo@example.com"]
    said, answer = [p.text for p in telegram.chat(GROUP)[2:]]
    assert said == "✅ Approved by Ana"  # as the pressed prompt shows it
    assert answer == "Sent."
    assert approval.text.endswith("✅ Approved by Ana") and approval.buttons == []


async def test_a_yes_with_more_to_it_is_a_rejection_with_its_reason(redis: aioredis.Redis) -> None:
    SENT.clear()
    model = ScriptedModel(
        [turn(call("send_email", to="bo@example.com")), reply("Not sent; to Carol then?")]
    )
    async with FakeTelegram() as telegram, bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="email Bo"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="yes, but to Carol"))
        await until(lambda: len(telegram.chat(ANA)) == 3)
        await harness.settle()
    assert SENT == []
    assert "Rejected by Ana" in telegram.chat(ANA)[0].text
    assert telegram.chat(ANA)[1].text.startswith("Understood — I won't go ahead")
    [result] = [b for b in model.turn_requests[-1].messages[-1].content if b.type == "tool_result"]
    assert "Their reason: yes, but to Carol" in str(result.content)


async def test_a_typed_no_on_slack_rejects_and_says_so(redis: aioredis.Redis) -> None:
    RAN.clear()
    model = ScriptedModel([turn(call("post_update", channel="general")), reply("Left it.")])
    async with slack_bot(redis, model) as s:
        await s.event(fs.dm_event("UANA", "post an update"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 1)
        await s.harness.settle()
        await s.event(fs.dm_event("UANA", "nope"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 3)
        await s.harness.settle()
    assert RAN == []
    said, answer = [p.body for p in s.fake.in_channel("DANA")[1:]]
    assert said == "❌ Rejected by <@UANA>" and answer == "Left it."
