"""A standing instruction for a conversation: "remember for this channel: answer in Spanish"
is kept (in a shared chat after its author's Approve, as a shared memory), reaches every run
in that channel whatever it is about, nowhere else, and leaves when it is removed through
/instructions and /forget. Through the in-process runtime on the real Redis and store."""

from __future__ import annotations

import redis.asyncio as aioredis

from adapters.base import ConversationKey
from adapters.slack import ADDRESSING as SLACK
from agent.protocols import RunContext
from memory import Embedder, open_store
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, reply_to, running
from tests.bot.recording import RecordingAdapter, press, run_in

LAUNCH = ConversationKey(platform="slack", chat_id="C0LAUNCH", team_id="T1")
OTHER = ConversationKey(platform="slack", chat_id="C0OTHER", team_id="T1")
ANA_DM = ConversationKey(platform="slack", chat_id="D0ANA", team_id="T1")
GROUP = ConversationKey(platform="telegram", chat_id="-100777")


async def say(
    harness: Harness, chat: ConversationKey, text: str, user: str = "U1", name: str = "Ana"
) -> str:
    return await reply_to(
        harness, chat, text, direct=chat.chat_id.startswith("D"), user=user, name=name
    )


def standing(system: str) -> str:
    """The block of standing instructions in a system prompt (its rules name the tag too)."""
    if "<standing_instructions>\n" not in system:
        return ""
    return system.split("<standing_instructions>\n")[1].split("</standing_instructions>")[0]


async def test_a_channel_instruction_reaches_every_run_there_and_leaves_when_removed(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder)
    model = ScriptedModel(
        [
            turn(call("remember", text="Answer in Spanish", kind="instruction")),
            reply("Vale, a partir de ahora en español."),
            reply("El despliegue es el jueves."),  # about the deploy
            reply("Cuatro."),  # 2 + 2
            reply("Four."),  # in another channel
            reply("Four."),  # in Ana's DM
            reply("Four."),  # after it was removed
        ]
    )
    adapter = RecordingAdapter(platform="slack", addressing=SLACK)
    async with running(redis, model, memory=store, adapter=adapter) as harness:
        await say(harness, LAUNCH, "remember for this channel: answer in Spanish")
        approval = harness.adapter.prompt(LAUNCH)
        assert "Follow in every run in this chat from now on: “Answer in Spanish”" in (
            approval.message.text
        )
        # not kept until its author approves: a channel's instructions are everyone's
        assert await store.instructions(channel("U1")) == []
        await harness.handle(press(approval, "Approve", user="U1", name="Ana"))
        assert [m.text for m in await store.instructions(channel("U2"))] == ["Answer in Spanish"]

        await say(harness, LAUNCH, "when do we deploy?", user="U2", name="Ben")
        deploy = model.turn_requests[-1].system
        await say(harness, LAUNCH, "what's 2 + 2?", user="U3", name="Cy")
        sums = model.turn_requests[-1].system
        for system in (deploy, sums):  # every run, whatever it is about, whoever asks
            assert "Answer in Spanish" in standing(system)
        assert "Answer in Spanish" not in system.split("</standing_instructions>")[1]
        await say(harness, OTHER, "what's 2 + 2?")
        assert standing(model.turn_requests[-1].system) == ""
        await say(harness, ANA_DM, "what's 2 + 2?")
        assert standing(model.turn_requests[-1].system) == ""

        listed = await say(harness, LAUNCH, "/instructions", user="U2", name="Ben")
        assert "1. Answer in Spanish — Ana told me in <#C0LAUNCH> on " in listed
        assert "Only whoever told me" in await say(harness, LAUNCH, "/forget 1", user="U2")
        await say(harness, LAUNCH, "/instructions", user="U1")
        removed = await say(harness, LAUNCH, "/forget 1", user="U1")
        assert "Answer in Spanish" in removed
        assert await store.instructions(channel("U1")) == []
        await say(harness, LAUNCH, "what's 2 + 2?", user="U2", name="Ben")
        assert standing(model.turn_requests[-1].system) == ""
        assert "No standing instructions here" in await say(harness, LAUNCH, "/instructions")


def channel(user: str) -> RunContext:
    return run_in(LAUNCH, user)


async def test_a_telegram_group_instruction_follows_every_run_in_the_group(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder)
    lena = run_in(GROUP, "501", "Lena")
    await store.remember("Always answer in German", lena, kind="instruction")
    await store.remember("Lena's bike is blue", lena)
    model = ScriptedModel([reply("Vier."), reply("Vier.")])
    async with running(redis, model, memory=store) as harness:
        listed = await say(harness, GROUP, "/instructions", user="502", name="Max")
        assert "1. Always answer in German — Lena told me in this chat on " in listed
        assert "bike" not in listed
        await say(harness, GROUP, "what's 2 + 2?", user="502", name="Max")
        system = model.turn_requests[-1].system
        assert "Always answer in German" in standing(system)
        # shown once, as an instruction, not again among the remembered facts
        assert system.count("Always answer in German") == 1
