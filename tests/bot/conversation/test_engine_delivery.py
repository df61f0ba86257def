"""A send the platform refuses is an outcome the executor handles, never an error that
strands the conversation: it settles, is stored, and the next message is answered."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from adapters.base import ConversationKey, MessageRef, OutboundMessage
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running
from tests.bot.recording import RecordingAdapter, dm, message
from tests.bot.runtime.test_delivery import ANA, CONVERSATION, bot, texts, until
from tests.fakes.telegram import FakeTelegram


@pytest.mark.parametrize(
    ("status", "description", "streaming", "first"),
    [
        (502, "Bad Gateway", False, ["Answer one."]),  # refused once: the retry delivers it
        (403, "Forbidden: bot was blocked by the user", False, []),  # refused for good
        (403, "Forbidden: bot was blocked by the user", True, []),  # the stream's last send
    ],
)
async def test_a_refused_answer_leaves_the_conversation_ready_for_the_next_message(
    redis: aioredis.Redis,
    telegram: FakeTelegram,
    status: int,
    description: str,
    streaming: bool,
    first: list[str],
) -> None:
    telegram.answer_error("sendMessage", status, description)
    model = ScriptedModel([reply("Answer one."), reply("Answer two.")])
    async with bot(redis, telegram, model, streaming=streaming) as harness:
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: bool(telegram.method_calls("sendMessage")))
        await harness.settle(within=30)
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.status == "idle" and session.last_entry is not None
        assert texts(telegram) == first

        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="and now?"))
        await until(lambda: "Answer two." in texts(telegram))
        await harness.settle(within=30)
        assert texts(telegram) == [*first, "Answer two."]
        assert len(model.turn_requests) == 2


class BrokenAdapter(RecordingAdapter):
    """An adapter whose send fails with something that is not a delivery failure at all."""

    broken = 1

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        if self.broken:
            self.broken -= 1
            raise RuntimeError("a bug in the adapter")
        return await super().send(conversation, message)


async def test_an_adapter_error_on_the_answer_does_not_strand_the_conversation(
    redis: aioredis.Redis,
) -> None:
    adapter = BrokenAdapter()
    model = ScriptedModel([reply("Lost to a bug."), reply("Here again.")])
    async with running(redis, model, adapter=adapter) as harness:
        chat = dm()
        await harness.submit(message(chat, "hi"))
        await harness.settle(within=30)
        session = await harness.runtime.sessions.load(chat.id)
        assert session.status == "idle" and session.last_entry is not None
        await harness.submit(message(chat, "again"))
        await harness.settle(within=30)
        assert adapter.texts(chat) == ["Here again."]
