"""Telegram Bot API 10.x: a streamed draft offers the stop button (`can_stop`), and the
`stopped_message_generation` update it sends stops the run like /cancel; topics in a private
chat (`message_thread_id`, Bot API 9.3) are separate conversations."""

from __future__ import annotations

from adapters.telegram.inbound import conversation_of
from tests.adapters.test_telegram import bot as scripted_bot
from tests.adapters.test_telegram_stream import ANA, PACE, anthropic, bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import anthropic as fa
from tests.fakes.telegram import FakeTelegram

LONG = "A very long essay about the tides, written slowly so the stop comes first. " * 6


async def test_the_draft_stop_button_stops_the_run_and_nothing_comes_after(
    redis, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(LONG, pace=PACE * 2, chunk=6))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="write about the tides"))
        await until(lambda: bool(telegram.drafts))
        ((chat, draft_id),) = telegram.drafts
        assert (chat, draft_id) in telegram.stoppable  # the draft offered the stop button
        telegram.push(telegram.stop_generation(ANA, draft_id))
        await until(lambda: bool(telegram.chat(ANA)))
        await harness.settle()
        texts = [p.text for p in telegram.chat(ANA)]
        assert texts == ["⏹ Stopped: “write about the tides”. Nothing more will run for it."]
        assert LONG not in "".join(texts)
        session = await harness.runtime.sessions.load(f"telegram:-:{ANA}:-")
        assert session.status == "idle"


async def test_a_stop_update_from_outside_the_allowlist_is_dropped(
    redis, telegram: FakeTelegram
) -> None:
    model = ScriptedModel([reply("Hi Ana.")])
    async with scripted_bot(redis, telegram, model, allowed_users=(str(ANA),)) as (harness, _):
        telegram.push(telegram.stop_generation(77, 5, name="Mallory"))
        telegram.push({"update_id": 1, "stopped_message_generation": {"draft_id": 3}})  # no chat
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hello"))
        await until(lambda: bool(telegram.chat(ANA)))
        await harness.settle()
        assert telegram.chat(77) == [] and [p.text for p in telegram.chat(ANA)] == ["Hi Ana."]


async def test_topics_of_a_private_chat_are_separate_conversations(
    redis, telegram: FakeTelegram
) -> None:
    model = ScriptedModel([reply("About cats."), reply("About dogs."), reply("Cats again.")])
    async with scripted_bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="cats?", thread_id=5))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        telegram.push(
            telegram.message(chat_id=ANA, user_id=ANA, text="dogs?", extra={"message_thread_id": 6})
        )
        await until(lambda: len(telegram.chat(ANA)) == 2)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="more cats", thread_id=5))
        await until(lambda: len(telegram.chat(ANA)) == 3)
        await harness.settle()
        posted = telegram.chat(ANA)
        assert [(p.text, p.thread_id) for p in posted] == [
            ("About cats.", 5),
            ("About dogs.", 6),
            ("Cats again.", 5),
        ]
        # Each topic has its own history: the third run saw cats, never dogs.
        history = str(model.turn_requests[-1].messages)
        assert "cats?" in history and "dogs?" not in history


def test_a_reply_chain_in_a_group_is_not_a_topic() -> None:
    from telegram import Message

    fake = FakeTelegram()
    raw = fake.message(chat_id=-100, user_id=ANA, text="hi", chat_type="group")["message"]
    raw["message_thread_id"] = 9  # a reply chain, not a forum topic
    message = Message.de_json(raw, None)  # type: ignore[arg-type]
    assert conversation_of(message).thread_id is None
