"""People can see where a memory came from (/memories: who, where, when), correct it in
place (/correct N new words, only its author), and ask which memories led the last answer
(/why): through the in-process runtime on the real Redis and memory store, as a Slack
channel and a Telegram private chat see it."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from adapters.base import ConversationKey
from adapters.slack import ADDRESSING as SLACK
from agent.protocols import RunContext
from memory import Embedder, open_store
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import Harness, reply_to, running
from tests.bot.recording import RecordingAdapter, run_in

LAUNCH = ConversationKey(platform="slack", chat_id="C0LAUNCH", team_id="T1")
LENA_DM = ConversationKey(platform="telegram", chat_id="501")


def in_launch(user: str, name: str) -> RunContext:
    return run_in(LAUNCH, user, name)


async def said(harness: Harness, conversation: ConversationKey, text: str, **who: str) -> str:
    """What Parley answered to one message: in a Slack channel, or a Telegram private chat."""
    shared = {"direct": False} if conversation.platform == "slack" else {}
    return await reply_to(harness, conversation, text, **shared, **who)


async def test_a_slack_channel_sees_who_said_what_where_and_when_and_only_the_author_corrects(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder)
    await store.remember("The launch is on 3 December", in_launch("U1", "Ana"))
    today = time.gmtime()
    day = f"{today.tm_mday} {time.strftime('%b', today)}"
    model = ScriptedModel([reply("The launch is on 5 December.")])
    adapter = RecordingAdapter(platform="slack", addressing=SLACK)
    async with running(redis, model, memory=store, adapter=adapter) as harness:
        listed = await said(harness, LAUNCH, "/memories", user="U2", name="Ben")
        assert (
            f"1. The launch is on 3 December (channel) — Ana told me in <#C0LAUNCH> on {day}"
            in listed
        )
        # Ben did not say it: he cannot change it
        refused = await said(harness, LAUNCH, "/correct 1 The launch is cancelled", user="U2")
        assert "isn't yours" in refused
        fixed = await said(harness, LAUNCH, "/correct 1 The launch is on 5 December", user="U1")
        assert (
            fixed
            == "Corrected: “The launch is on 3 December” is now “The launch is on 5 December”."
        )
        again = await said(harness, LAUNCH, "/memories", user="U1", name="Ana")
        assert (
            f"1. The launch is on 5 December (channel) — you told me in <#C0LAUNCH> on {day}, "
            f"corrected on {day}" in again
        )
        # recall finds it by its new words, and /why names what the answer stood on
        answer = await said(harness, LAUNCH, "when is the launch happening?", user="U2", name="Ben")
        assert "5 December" in answer
        system = model.turn_requests[-1].system
        assert "The launch is on 5 December" in system and "3 December" not in system
        why = await said(harness, LAUNCH, "/why", user="U2", name="Ben")
        assert why == (
            "For my last answer here I used what I remember:\n"
            f"• The launch is on 5 December — Ana told me in <#C0LAUNCH> on {day}, "
            f"corrected on {day}"
        )
        # forgotten: no longer listed as a reason
        await said(harness, LAUNCH, "/forget 1", user="U1")
        assert await said(harness, LAUNCH, "/why", user="U2") == (
            "I didn't use any memory for my last answer here."
        )


async def test_a_telegram_private_chat_says_you_told_me_in_a_direct_message(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder)
    lena = run_in(LENA_DM, "501", "Lena", direct=True)
    await store.remember("Lena's dentist is Dr. Keller", lena)
    model = ScriptedModel([])
    async with running(redis, model, memory=store) as harness:
        listed = await said(harness, LENA_DM, "/memories", user="501", name="Lena")
        assert (
            "Lena's dentist is Dr. Keller (private) — you told me in a direct message on " in listed
        )
        usage = await said(harness, LENA_DM, "/correct 1", user="501")
        assert (
            usage == "Tell me the number and the new words: /correct N new words (see /memories)."
        )
        assert "isn't on the list" in await said(harness, LENA_DM, "/correct 7 x", user="501")
        await said(harness, LENA_DM, "/correct 1 Lena's dentist is Dr. Kellner", user="501")
        record = (await store.list_memories(lena)).records[0]
        assert record.text == "Lena's dentist is Dr. Kellner" and record.corrected_at
        found = await store.recall("who is Lena's dentist?", lena)
        assert [m.text for m in found] == ["Lena's dentist is Dr. Kellner"]
