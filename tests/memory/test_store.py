"""Memory on a real Redis Stack with the real offline embedding model."""

from __future__ import annotations

import dataclasses

import pytest
import redis.asyncio as aioredis
from redisvl.utils.vectorize import CustomVectorizer

from agent.builtin_tools import builtin_registry
from agent.loop import Agent
from agent.outcomes import Finished
from agent.protocols import RunContext
from bot.wiring.memory_setup import completion
from memory import Embedder, MemoryIndexMismatch, RedisMemoryStore, ollama_embedder, open_store
from memory.extract import FactExtractor, parse_facts
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes.ollama import FakeOllama


def slack(user: str, *, channel: str, direct: bool, conversation: str = "") -> RunContext:
    return RunContext(
        conversation_id=conversation or f"slack:T1:{channel}:-",
        platform="slack",
        user_id=user,
        chat_id=channel,
        team_id="T1",
        is_direct=direct,
    )


ANA_DM = slack("UANA", channel="DANA", direct=True)
ANA_DM_LATER = slack("UANA", channel="DANA", direct=True, conversation="slack:T1:DANA:1700.1")
BOB_DM = slack("UBOB", channel="DBOB", direct=True)
ANA_IN_CHANNEL = slack("UANA", channel="CGENERAL", direct=False)
BOB_IN_CHANNEL = slack("UBOB", channel="CGENERAL", direct=False)


async def test_recalled_by_meaning_in_a_later_conversation(store: RedisMemoryStore) -> None:
    await store.remember("I'm allergic to peanuts", ANA_DM)
    await store.remember("My sister lives in Porto", ANA_DM)
    found = await store.recall("which foods should I stay away from?", ANA_DM_LATER)
    assert found and found[0].text == "I'm allergic to peanuts"
    assert all("peanut" not in m.text for m in found[1:])


async def test_nothing_to_recall_costs_no_embedding(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    queries: list[str] = []
    inner = embedder.vectorizer

    async def counted(text: str, **kwargs: object) -> list[float]:
        queries.append(text)
        return list(await inner.aembed(text))

    vectorizer = CustomVectorizer(embed=inner.embed, aembed=counted, embed_many=inner.embed_many)
    store = await open_store(redis, dataclasses.replace(embedder, vectorizer=vectorizer))
    assert await store.recall("what do you know about me?", BOB_DM) == []
    assert queries == []
    await store.remember("Bob takes his coffee black", BOB_DM)
    queries.clear()
    found = await store.recall("how do I like my coffee?", BOB_DM)
    assert [m.text for m in found] == ["Bob takes his coffee black"]
    assert queries == ["how do I like my coffee?"]


async def test_private_memories_never_reach_someone_else(store: RedisMemoryStore) -> None:
    await store.remember("My salary is 90k and I'm job hunting", ANA_DM)
    for context in (BOB_DM, BOB_IN_CHANNEL, ANA_IN_CHANNEL):
        found = await store.recall("what is Ana's salary? is she job hunting?", context)
        assert all("salary" not in m.text for m in found), context
    assert (await store.list_memories(BOB_DM)).records == []
    assert (await store.list_memories(ANA_IN_CHANNEL)).records == []


async def test_team_memories_reach_team_members(store: RedisMemoryStore) -> None:
    await store.remember("The deploy freeze starts on Thursday", ANA_DM, share="team")
    for context in (BOB_DM, BOB_IN_CHANNEL):
        found = await store.recall("when does the deploy freeze begin?", context)
        assert [m.text for m in found][:1] == ["The deploy freeze starts on Thursday"]
    other_team = RunContext(
        conversation_id="x", platform="slack", user_id="UEVE", chat_id="DEVE", team_id="T2"
    )
    assert await store.recall("deploy freeze", other_team) == []


async def test_channel_memories_stay_in_their_channel(store: RedisMemoryStore) -> None:
    await store.remember("This channel's standup is at 9:30", BOB_IN_CHANNEL)
    assert [m.text for m in await store.recall("when is standup?", ANA_IN_CHANNEL)] == [
        "This channel's standup is at 9:30"
    ]
    assert await store.recall("when is standup?", ANA_DM) == []


async def test_near_duplicates_merge(store: RedisMemoryStore) -> None:
    first = await store.remember("I prefer tea over coffee", ANA_DM)
    second = await store.remember("I prefer tea over coffee.", ANA_DM)
    other = await store.remember("I live in Lisbon", ANA_DM)
    assert second.id == first.id and other.id != first.id
    assert [m.text for m in (await store.list_memories(ANA_DM)).records] == [
        "I live in Lisbon",
        "I prefer tea over coffee.",
    ]


async def test_a_merge_keeps_the_exact_time_the_memory_was_first_written(
    store: RedisMemoryStore,
) -> None:
    """A search returns the time rounded to 10 ms; written back, it could sort the merged
    memory after one written just after it."""
    first = await store.remember("I prefer tea over coffee", ANA_DM)
    key = store._key(first.id)
    written = await store.redis.hget(key, "created_at")
    merged = await store.remember("I prefer tea over coffee.", ANA_DM)
    assert merged.id == first.id and merged.text.endswith(".")
    assert await store.redis.hget(key, "created_at") == written
    assert abs(merged.created_at - first.created_at) < 0.01


async def test_forget_one_or_all_but_only_your_own(store: RedisMemoryStore) -> None:
    await store.remember("I'm vegetarian", ANA_DM)
    await store.remember("I run on Sundays", ANA_DM)
    await store.remember("Standup moved to 10", BOB_DM, share="team")
    mine = (await store.list_memories(ANA_DM)).records
    assert [m.text for m in mine] == ["Standup moved to 10", "I run on Sundays", "I'm vegetarian"]
    assert [m.scope_label for m in mine] == ["team", "private", "private"]
    assert await store.forget(ANA_DM, mine[2].id) == 1
    assert await store.recall("what do I eat?", ANA_DM) == [] or all(
        "vegetarian" not in m.text for m in await store.recall("what do I eat?", ANA_DM)
    )
    team_memory = (await store.list_memories(BOB_DM)).records[0]
    assert await store.forget(ANA_DM, team_memory.id) == 0  # Bob's, not Ana's
    assert await store.forget(ANA_DM, "no-such-id") == 0
    assert await store.forget(ANA_DM) == 1
    # Ana still sees the team's memory Bob wrote; she cannot remove it
    assert [m.text for m in (await store.list_memories(ANA_DM)).records] == ["Standup moved to 10"]
    assert [m.text for m in (await store.list_memories(BOB_DM)).records] == ["Standup moved to 10"]


async def test_reindex_after_a_dimension_change(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    await store.remember("I'm allergic to peanuts", ANA_DM)
    async with FakeOllama(models=["all-minilm"], dimensions=64) as fake:
        other = await ollama_embedder(fake.url, "nomic-embed-text")
        assert other.dims == 64
        with pytest.raises(MemoryIndexMismatch, match="parley memory reindex"):
            await open_store(redis, other)
        rebuilt = RedisMemoryStore(redis, other)
        assert await rebuilt.reindex() == 1
        reopened = await open_store(redis, other)
        found = await reopened.recall("I'm allergic to peanuts", ANA_DM)
        assert [m.text for m in found] == ["I'm allergic to peanuts"]
        await other.close()


async def test_the_agent_recalls_before_thinking_and_remembers_through_its_tool(
    store: RedisMemoryStore,
) -> None:
    model = ScriptedModel(
        [
            turn(call("remember", text="Ana's team ships on Fridays")),
            reply("Noted."),
            reply("Fridays."),
        ]
    )
    agent = Agent(model, builtin_registry(), memory=store)
    assert isinstance(await agent.run("remember that we ship on Fridays", ANA_DM), Finished)
    outcome = await agent.run("when do we ship?", ANA_DM_LATER)
    assert isinstance(outcome, Finished)
    system = model.turn_requests[-1].system
    assert "Ana's team ships on Fridays" in system
    bob = await store.recall("when do we ship?", BOB_DM)
    assert bob == []


async def test_end_of_run_extraction(store: RedisMemoryStore) -> None:
    from agent.messages import Message

    model = ScriptedModel([reply('Facts: ["Ana is training for a marathon in May"]')])
    facts = await FactExtractor(completion(model), store).extract(
        [Message.user("I'm training for the May marathon"), Message.assistant("Good luck!")],
        ANA_DM,
    )
    assert [(m.text, m.origin) for m in facts] == [
        ("Ana is training for a marathon in May", "extracted")
    ]
    assert [m.text for m in (await store.list_memories(ANA_DM)).records] == [facts[0].text]
    assert parse_facts("nothing here") == [] and parse_facts("[1, 'x']") == []


async def test_memories_and_forget_commands(redis: aioredis.Redis, store: RedisMemoryStore) -> None:
    from tests.bot.harness import running
    from tests.bot.recording import click, dm, message

    chat = dm("UANA", platform="telegram")
    context = RunContext(
        conversation_id=chat.id, platform="telegram", user_id="UANA", chat_id="UANA"
    )
    for fact in ["I'm vegetarian", "I live in Lisbon", "I cycle to work", "My cat is Miso"]:
        await store.remember(fact, context)
    async with running(redis, ScriptedModel([]), memory=store) as harness:

        async def command(text: str, name: str, args: str = "") -> None:
            await harness.submit(message(chat, text, user="UANA", command=name, args=args))
            await harness.settle()

        await command("/memories", "memories")
        listing = harness.adapter.in_conversation(chat)[-1]
        await command("/forget 3", "forget", "3")
        harness_posts = harness.adapter.in_conversation(chat)
        press = click(chat, listing, listing.message.buttons[0].value, user="UANA")
        await harness.submit(dataclasses.replace(press, is_direct=True))
        await harness.settle()
        await command("/memories", "memories")
        await command("/forget all", "forget", "all")
        texts = harness.adapter.texts(chat)
    told = " — you told me in a direct message on "
    listed = [line.partition(told)[0] for line in texts[0].splitlines() if told in line]
    assert listed == [
        "1. My cat is Miso (private)",
        "2. I cycle to work (private)",
        "3. I live in Lisbon (private)",
        "4. I'm vegetarian (private)",
    ]
    assert [b.label for b in listing.message.buttons] == [f"Forget {n}" for n in range(1, 5)]
    assert listing.message.private_to == "UANA"
    assert "Forgotten" in texts[1] and "Lisbon" in texts[1] and len(harness_posts) == 2
    assert texts[2] == "Forgotten."  # the button under "My cat is Miso"
    again = [line.partition(told)[0] for line in texts[3].splitlines() if told in line]
    assert again == ["1. I cycle to work (private)", "2. I'm vegetarian (private)"]
    assert "Miso" not in texts[3] and "Lisbon" not in texts[3]
    assert "forgot 2 things" in texts[4]
    assert (await store.list_memories(context)).records == []


async def test_extraction_says_what_it_kept_with_a_forget_button(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    from adapters.base import OutboundMessage
    from agent.outcomes import Outcome
    from bot.conversation.commands import remembered_note
    from tests.bot.harness import running
    from tests.bot.recording import click, dm, message

    extracting = ScriptedModel(
        [reply('["Ana is training for a marathon in May", "Ana prefers trail shoes"]')]
    )
    extractor = FactExtractor(completion(extracting), store)

    async def after_run(outcome: Outcome) -> OutboundMessage | None:
        state = outcome.state
        return remembered_note(await extractor.extract(state.messages, state.context))

    chat = dm("UANA", platform="telegram")
    model = ScriptedModel([reply("Good luck with the training!")])
    async with running(redis, model, memory=store, after_run=after_run) as harness:
        await harness.submit(message(chat, "I'm training for the May marathon", user="UANA"))
        await harness.settle()
        answer, note = harness.adapter.in_conversation(chat)
        assert answer.message.text == "Good luck with the training!"
        assert note.message.text == (
            "I'll remember:\n1. Ana is training for a marathon in May\n2. Ana prefers trail shoes"
        )
        assert [b.label for b in note.message.buttons] == ["Forget 1", "Forget 2"]
        press = click(chat, note, note.message.buttons[1].value, user="UANA")
        await harness.submit(dataclasses.replace(press, is_direct=True))
        await harness.settle()
    context = RunContext(
        conversation_id=chat.id, platform="telegram", user_id="UANA", chat_id="UANA"
    )
    left = (await store.list_memories(context)).records
    assert [(m.text, m.origin) for m in left] == [
        ("Ana is training for a marathon in May", "extracted")
    ]
    assert remembered_note([]) is None
