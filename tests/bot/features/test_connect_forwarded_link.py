"""A forwarded Connect link must not connect the wrong account.

Whoever opens a Connect link signs in with their own account. The account becomes the
person's only when that person types, in their chat, the one-time code the sign-in page
showed: a stranger who was forwarded the link (or found it) gets a code they cannot use,
and the person's runs never carry the stranger's token. The code works once, expires, and
counts only from its person, where they asked (or in their own private chat).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet

from adapters.base import ConversationKey, InboundMessage
from agent.mcp import ServerConfig
from bot.conversation.engine import WAIT_FOR_REQUESTER
from bot.conversation.texts import CODE_REFUSED, NONE_CONNECTED
from bot.conversation.texts import CONNECT_SENT as SENT
from bot.features.connections import oauth
from bot.features.connections.held import MAX_TRIES
from bot.features.connections.store import Connections, Pending
from bot.runtime.keys import Keys
from bot.wiring.connection import redis_client
from tests.bot.features.test_mcp_oauth import (
    ANA,
    connect_link,
    connecting,
    everything_in,
    get,
    ledger_lines,
    parley_at,
    signed_in,
    world,
)
from tests.bot.harness import settings
from tests.bot.recording import message
from tests.private_redis import private_redis

pytestmark = pytest.mark.process

GROUP = ConversationKey(platform="telegram", chat_id="-100")
OTHER_GROUP = ConversationKey(platform="telegram", chat_id="-200")


def asks_in_the_group() -> InboundMessage:
    """Ana asks, in the group, for what needs her tracker account."""
    return message(GROUP, "who am I on the tracker?", direct=False)


async def test_a_forwarded_link_opened_by_someone_else_never_connects_their_account(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    model = connecting()
    async with world(tmp_path) as w, parley_at(redis, w, model) as (harness, connections):
        link = await connect_link(harness, asks_in_the_group(), ANA)

        # Ana forwards the link; Bo opens it and signs in as himself (mallory at the server)
        code = await signed_in(w, link, "mallory")
        await harness.settle(within=60)
        assert await connections.connected("telegram", "42") == []
        assert harness.adapter.texts(GROUP)[-1] == SENT.format(who="Ana")  # nothing resumed
        assert len(model.requests) == 1

        # Bo types the code he was shown, in the group where Ana's run waits: not his question
        await harness.handle(message(GROUP, code, user="77", name="Bo", direct=False), within=60)
        assert harness.adapter.texts(GROUP)[-1] == WAIT_FOR_REQUESTER.format(who="Ana")
        assert await connections.connected("telegram", "42") == []
        assert await connections.connected("telegram", "77") == []

        # Ana's /connections shows nothing; her waiting run never called with mallory's token
        await harness.handle(message(ANA, "/connections", command="connections"), within=60)
        assert harness.adapter.texts(ANA)[-1] == NONE_CONNECTED
        assert ledger_lines(w.ledger) == []
        assert len(model.requests) == 1
        issued = [token for token, g in w.auth.access.items() if g.login == "mallory"]
        stored = await everything_in(redis)
        assert issued and not any(token in stored for token in issued)

        # a code typed in another group, even by Ana, does nothing there
        await harness.handle(message(OTHER_GROUP, code, direct=False), within=60)
        assert harness.adapter.texts(OTHER_GROUP)[-1] == CODE_REFUSED["elsewhere"]
        assert await connections.connected("telegram", "42") == []


async def test_a_sign_in_held_across_a_restart_and_a_redis_outage_is_confirmed_after(
    tmp_path: Path,
) -> None:
    model = connecting()
    async with private_redis(tmp_path / "redis") as server, world(tmp_path) as w:
        client = redis_client(server.url, settings())
        try:
            async with parley_at(client, w, model) as (harness, _):
                link = await connect_link(harness, message(ANA, "who am I on the tracker?"), ANA)
                back = await w.auth.sign_in(link, login="alice")
                await server.down()
                # Redis away: the page says so and the sign-in's state is kept
                status, page = await get(back)
                assert status == 503 and "right now" in page
                await server.up()
                status, page = await get(back)
                assert status == 200 and "send this code" in page
            # a new process: the held sign-in is still there, and the code confirms it
            async with parley_at(client, w, model) as (harness, connections):
                code = page.split("<b>")[1].split("</b>")[0]
                await harness.handle(message(ANA, code), within=60)
                assert harness.adapter.texts(ANA)[-1] == "You're alice."
                assert await connections.connected("telegram", "42") == ["tracker"]
                assert [line[:2] for line in ledger_lines(w.ledger)] == [["whoami", "alice"]]
        finally:
            await client.aclose()


async def test_only_its_person_confirms_it_once_where_they_asked_before_it_expires(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    model = connecting()
    async with world(tmp_path) as w, parley_at(redis, w, model) as (harness, connections):
        link = await connect_link(harness, asks_in_the_group(), ANA)
        code = await signed_in(w, link, "alice")
        wrong = "000 000" if code != "000 000" else "111 111"
        await harness.handle(message(GROUP, wrong, direct=False), within=60)
        assert harness.adapter.texts(GROUP)[-1] == CODE_REFUSED["wrong"]
        await harness.submit(message(ANA, code))  # her private chat, where the link came
        await harness.settle(within=60)
        assert harness.adapter.texts(GROUP)[-1] == "You're alice."
        assert await connections.connected("telegram", "42") == ["tracker"]


def held_for(connections: Connections, user: str = "42", where: str = "telegram:-100") -> Pending:
    return Pending(
        server="tracker",
        platform="telegram",
        user_id=user,
        user_name="Ana",
        team_id=None,
        conversation_id=where,
        is_direct=False,
        question_id="q1",
        verifier="v",
    )


def connections_at(redis: aioredis.Redis, clock: list[float]) -> Connections:
    return Connections(
        redis,
        Keys(),
        servers={"tracker": ServerConfig(url="http://127.0.0.1:9/mcp", auth="user")},
        secret_key=KEY,
        public_url="http://127.0.0.1:9",
        connect_ttl=600,
        clock=lambda: clock[0],
    )


KEY = Fernet.generate_key().decode()
TOKENS = oauth.Tokens(access_token="at-mallory", refresh_token="rt-mallory")


async def test_a_code_works_once_expires_and_wrong_guesses_drop_what_is_held(
    redis: aioredis.Redis,
) -> None:
    clock = [time.time()]
    c = connections_at(redis, clock)
    code = await c.hold(held_for(c), TOKENS)
    stored = await everything_in(redis)
    assert "at-mallory" not in stored and "rt-mallory" not in stored  # held encrypted

    # someone else typing it: nothing of theirs is held, it is just a message
    assert await c.confirm("telegram", "77", "telegram:-100", False, code) is None
    # as the page shows it, with its space
    found = await c.confirm("telegram", "42", "telegram:-100", False, f"{code[:3]} {code[3:]}")
    assert found is not None and found.held is not None
    assert await c.connected("telegram", "42") == ["tracker"]
    # replayed: used up
    assert await c.confirm("telegram", "42", "telegram:-100", False, code) is None

    # expired: the clock moves past PARLEY_CONNECT_TTL
    await c.disconnect("tracker", "telegram", "42")
    code = await c.hold(held_for(c), TOKENS)
    clock[0] += 601
    found = await c.confirm("telegram", "42", "telegram:-100", False, code)
    assert found is not None and found.refusal == "expired"
    assert await c.connected("telegram", "42") == []

    # wrong guesses: after MAX_TRIES every held sign-in of the person's is gone
    code = await c.hold(held_for(c), TOKENS)
    wrong = "000000" if code != "000000" else "111111"
    refusals = [
        found.refusal
        for _ in range(MAX_TRIES)
        if (found := await c.confirm("telegram", "42", "telegram:-100", False, wrong))
    ]
    assert refusals == ["wrong"] * (MAX_TRIES - 1) + ["too_many"]
    assert await c.confirm("telegram", "42", "telegram:-100", False, code) is None
    assert await c.connected("telegram", "42") == []


async def test_a_sign_in_held_by_the_release_before_is_confirmed(redis: aioredis.Redis) -> None:
    """Held before the record codec (its fields through `asdict` and `json.dumps`): its code
    still confirms it, and it keeps that form (the same fields) when held now."""
    clock = [time.time()]
    c = connections_at(redis, clock)
    held = {
        "server": "tracker",
        "platform": "telegram",
        "user_id": "42",
        "user_name": "Ana",
        "team_id": None,
        "conversation_id": "telegram:-100",
        "is_direct": False,
        "question_id": "q1",
        "tokens": TOKENS.model_dump_json(),
        "expires": clock[0] + 600,
    }
    digest = hashlib.sha256(b"telegram:42:123456").hexdigest()
    sealed = c.held.fernet.encrypt(json.dumps(held).encode())
    await redis.set(Keys().oauth_held("telegram", "42", digest), sealed, px=600_000)
    await redis.sadd(Keys().oauth_holding("telegram", "42"), digest)
    found = await c.confirm("telegram", "42", "telegram:-100", False, "123 456")
    assert found is not None and found.held is not None
    assert await c.connected("telegram", "42") == ["tracker"]

    await c.hold(held_for(c), TOKENS)
    (key,) = [k async for k in redis.scan_iter("parley:oauth:held:*")]
    now = json.loads(c.held.fernet.decrypt(await redis.get(key)))
    assert set(now) == set(held) and now["tokens"] == held["tokens"]
