"""The numbered /memories list a person last saw, kept in Redis through the record codec."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from bot.conversation.shown import ShownList, ShownLists
from bot.runtime.keys import Keys

WHERE, WHO = "telegram:-:42:-", "42"


async def test_a_list_kept_by_the_release_before_reads_back_and_keeps_its_form(
    redis: aioredis.Redis,
) -> None:
    lists = ShownLists(redis, Keys(), ttl=60)
    key = Keys().shown_list(WHERE, WHO)
    written_before = {
        "page": 2,
        "entries": {"1": ["m1", "tea"], "2": ["m2", "ê"]},
        "message_id": "7",
    }
    await redis.set(key, json.dumps(written_before))
    shown = await lists.get(WHERE, WHO)
    assert shown == ShownList(page=2, entries={1: ("m1", "tea"), 2: ("m2", "ê")}, message_id="7")

    await lists.save(WHERE, WHO, shown.keeping({"m2"}))
    assert json.loads(await redis.get(key) or b"") == {
        "page": 2,
        "entries": {"2": ["m2", "ê"]},
        "message_id": "7",
    }
    await lists.clear(WHERE, WHO)
    assert await lists.get(WHERE, WHO) is None
