"""Files sent as the answer to a pending question go along with the answer."""

from __future__ import annotations

import base64

import redis.asyncio as aioredis

from agent.messages import ImageBlock, ToolResultBlock
from tests.adapters.samples import png
from tests.adapters.test_telegram import ANA, bot
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until


async def test_a_photo_answering_a_question_reaches_the_model_as_image_bytes(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    picture = png(120, 80, (200, 0, 0))
    photo_id = telegram.add_file(picture, path="photos/red.png")
    model = ScriptedModel(
        [
            turn(call("ask_user", question="Which poster do you mean?", options=[])),
            reply("That red one — noted."),
        ]
    )
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="print my poster"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle(within=30)
        assert "Which poster" in telegram.chat(ANA)[0].text
        telegram.push(
            telegram.message(
                chat_id=ANA,
                user_id=ANA,
                photo=telegram.photo_sizes((photo_id, 120, 80)),
                caption="this one",
            )
        )
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle(within=30)
    assert telegram.chat(ANA)[1].text == "That red one — noted."
    answered = model.turn_requests[-1].messages[-1]
    [result] = [b for b in answered.content if isinstance(b, ToolResultBlock)]
    assert result.content == "The user answered: this one"
    [image] = [b for b in answered.content if isinstance(b, ImageBlock)]
    assert base64.b64decode(image.data) == picture
    assert answered.content.index(result) < answered.content.index(image)  # results first
