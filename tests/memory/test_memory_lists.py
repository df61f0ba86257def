"""/memories lists stay true: a list with Forget buttons is shown again (fresh numbers, fresh
buttons) after a Forget, and `/forget N` deletes the memory numbered N on the list the person
last saw, even when memories came or went since. Real Telegram adapter, fake Bot API, real
runtime and memory store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from memory import Embedder, RedisMemoryStore, open_store
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import Harness
from tests.fakes.telegram import FakeTelegram, Posted
from tests.memory.test_stories import ANA, harness_context, telegram_bot, until

OLDEST, MIDDLE, NEWEST = "Ana likes tea", "Ana's bike is blue", "Ana lives in Porto"


async def three(store: RedisMemoryStore) -> None:
    for text in (OLDEST, MIDDLE, NEWEST):
        await store.remember(text, harness_context(ANA))
        await asyncio.sleep(0.01)  # newest first needs distinct times


@contextlib.asynccontextmanager
async def listed(
    redis: aioredis.Redis, embedder: Embedder
) -> AsyncIterator[tuple[RedisMemoryStore, FakeTelegram, Harness, Posted]]:
    """Three of Ana's memories, and the /memories list she was shown."""
    store = await open_store(redis, embedder)
    await three(store)
    async with FakeTelegram() as fake, telegram_bot(redis, fake, ScriptedModel([]), store) as h:
        fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/memories"))
        await until(lambda: len(fake.chat(ANA)) == 1)
        yield store, fake, h, fake.chat(ANA)[0]


async def left(store: RedisMemoryStore) -> list[str]:
    return [m.text for m in (await store.list_memories(harness_context(ANA))).records]


async def test_forget_n_deletes_what_the_list_on_screen_numbers_n(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    async with listed(redis, embedder) as (store, fake, h, listing):
        assert f"2. {MIDDLE}" in listing.text
        # Meanwhile something new is remembered: a fresh listing would number MIDDLE 3.
        await store.remember("Ana starts work at nine", harness_context(ANA))
        fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/forget 2"))
        await until(lambda: len(fake.chat(ANA)) == 2)
        await h.settle(within=30)
        assert fake.chat(ANA)[1].text == f"Forgotten: “{MIDDLE}”"
        assert await left(store) == ["Ana starts work at nine", NEWEST, OLDEST]
        # The list on screen was shown again, numbered as a fresh /memories would.
        assert listing.text.startswith("Here's what I remember here, newest first (3 in all)")
        assert "1. Ana starts work at nine" in listing.text and MIDDLE not in listing.text
        assert [b["text"] for b in listing.buttons] == ["Forget 1", "Forget 2", "Forget 3"]
        fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/forget 3"))
        await until(lambda: len(fake.chat(ANA)) == 3)
        await h.settle(within=30)
        assert fake.chat(ANA)[2].text == f"Forgotten: “{OLDEST}”"
        fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/forget 7"))
        await until(lambda: len(fake.chat(ANA)) == 4)
        await h.settle(within=30)
    assert fake.chat(ANA)[3].text == "Number 7 isn't on the list I showed you; see /memories."
    assert await left(store) == ["Ana starts work at nine", NEWEST]


async def test_a_forget_press_shows_the_list_again_with_fresh_numbers(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    async with listed(redis, embedder) as (store, fake, h, listing):
        fake.click(listing, "Forget 1", user_id=ANA)
        await until(lambda: NEWEST not in listing.text)
        await h.settle(within=30)
        assert f"1. {MIDDLE}" in listing.text and f"2. {OLDEST}" in listing.text
        assert [b["text"] for b in listing.buttons] == ["Forget 1", "Forget 2"]
        # "2" now means what the list shows as 2.
        fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/forget 2"))
        await until(lambda: any(p.text == f"Forgotten: “{OLDEST}”" for p in fake.chat(ANA)))
        await h.settle(within=30)
    assert await left(store) == [MIDDLE]
    assert [b["text"] for b in listing.buttons] == ["Forget 1"]
