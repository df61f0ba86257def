"""The Telegram bot no longer answers whoever finds it: by default (PARLEY_TELEGRAM_ACCESS=
pairing) a person off the allowlist gets a pairing code, and reaches the agent only once the
operator or an approver accepted it. Through the real python-telegram-bot against the fake
Bot API, with the real runtime and Redis; the model would obey anything it was given."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import redis.asyncio as aioredis

from bot.cli import main
from bot.config import Settings
from bot.runtime.keys import Keys
from bot.runtime.pairing import Pairings, access_line
from tests.adapters.test_telegram import ANA, BOB, GROUP, bot
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram
from tests.helpers import until

T = TypeVar("T")
CAROL = 9  # on the allowlist, but no approver
CODE = re.compile(r"pairing code ([A-Z2-9]{8})")


def approving(**extra: str) -> Settings:
    return Settings.load(
        env_file=None,
        runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2},
        access={"PARLEY_APPROVERS": str(ANA)},
        **extra,  # type: ignore[arg-type]
    )


def texts(telegram: FakeTelegram, chat: int) -> list[str]:
    return [m.text for m in telegram.chat(chat)]


async def test_a_stranger_gets_a_pairing_code_and_never_reaches_the_agent(
    redis: aioredis.Redis,
) -> None:
    # Before: with no allowlist the bot answered anyone, and the model obeyed them.
    model = ScriptedModel([turn(call("remember", text="Bob owns this bot")), reply("Done.")])
    async with (
        FakeTelegram() as telegram,
        bot(redis, telegram, model, open_access=False) as (harness, adapter),
    ):
        adapter.pairing = Pairings(redis, harness.runtime.keys)
        telegram.push(telegram.message(chat_id=BOB, user_id=BOB, name="Bob", text="remember me"))
        await until(lambda: len(telegram.chat(BOB)) == 1)
        telegram.push(telegram.message(chat_id=BOB, user_id=BOB, name="Bob", text="again"))
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=BOB, chat_type="group", text=f"@{BOT_USERNAME} hi"
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
    [offer] = texts(telegram, BOB)  # once per code, however often he writes
    found = CODE.search(offer)
    assert found is not None and f"parley pairing approve {found[1]}" in offer
    [pending] = await Pairings(redis, Keys()).pending()
    assert (pending.code, pending.user_id, pending.name) == (found[1], str(BOB), "Bob")
    # in a group no code is shown to everyone: he is told to write privately
    assert texts(telegram, GROUP) == [
        "I only talk with people I'm paired with. Message me privately for a pairing code."
    ]
    assert not model.turn_requests


async def test_an_approver_pairs_a_person_once_and_nobody_else_can(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("Hello Bob.")])
    settings = approving(telegram={"PARLEY_TELEGRAM_ALLOWED_USERS": f"{ANA},{CAROL}"})
    async with (
        FakeTelegram() as telegram,
        bot(
            redis,
            telegram,
            model,
            settings=settings,
            open_access=False,
            allowed_users=(str(ANA), str(CAROL)),
        ) as (harness, adapter),
    ):
        adapter.pairing = Pairings(redis, harness.runtime.keys)
        telegram.push(telegram.message(chat_id=BOB, user_id=BOB, name="Bob", text="hi"))
        await until(lambda: len(telegram.chat(BOB)) == 1)
        code = CODE.search(texts(telegram, BOB)[0])
        assert code is not None
        # Carol may talk to the bot, but not let others in; Bob cannot pair himself
        telegram.push(telegram.message(chat_id=CAROL, user_id=CAROL, text=f"/pair {code[1]}"))
        await until(lambda: len(telegram.chat(CAROL)) == 1)
        assert texts(telegram, CAROL) == [
            "Only an approver (PARLEY_APPROVERS) can accept a pairing code."
        ]
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text=f"/pair {code[1].lower()}"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        assert texts(telegram, ANA) == [f"Paired: Bob ({BOB}) can talk with me now."]
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text=f"/pair {code[1]}"))
        await until(lambda: len(telegram.chat(ANA)) == 2)
        assert "no live pairing code" in texts(telegram, ANA)[1]  # used once
        telegram.push(telegram.message(chat_id=BOB, user_id=BOB, name="Bob", text="hello"))
        await until(lambda: len(telegram.chat(BOB)) == 2)
        await harness.settle()
    assert texts(telegram, BOB)[1] == "Hello Bob."
    assert len(model.turn_requests) == 1


@pytest.mark.process
def test_the_operator_approves_and_revokes_a_code_with_parley_pairing(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def with_pairings(work: Callable[[Pairings], Awaitable[T]]) -> T:
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await work(Pairings(client, Keys()))
        finally:
            await client.aclose()

    code = asyncio.run(with_pairings(lambda p: p.code_for(str(BOB), "Bob")))
    assert asyncio.run(with_pairings(lambda p: p.code_for(str(BOB), "Bob"))) == code  # one
    env = tmp_path / "ops.env"
    env.write_text(f"REDIS_URL={redis_url}\n")
    assert main(["--env-file", str(env), "pairing"]) == 0
    assert f"code {code}  Bob (user {BOB})" in capsys.readouterr().out
    assert main(["--env-file", str(env), "pairing", "approve", "WRONG123"]) == 1
    assert main(["--env-file", str(env), "pairing", "approve", code]) == 0
    assert asyncio.run(with_pairings(lambda p: p.admitted(str(BOB))))
    assert main(["--env-file", str(env), "pairing", "revoke", str(BOB)]) == 0
    assert not asyncio.run(with_pairings(lambda p: p.admitted(str(BOB))))


def test_the_default_is_pairing_and_one_setting_opens_the_bot() -> None:
    closed = Settings.load(env_file=None, telegram={"PARLEY_TELEGRAM_ALLOWED_USERS": ""})
    assert closed.telegram.access == "pairing"
    assert access_line(closed).startswith("pairing: people paired with a code")
    opened = Settings.load(env_file=None, telegram={"PARLEY_TELEGRAM_ACCESS": "open"})
    assert access_line(opened).startswith("open: anyone")
    listed = Settings.load(
        env_file=None,
        telegram={"PARLEY_TELEGRAM_ACCESS": "open", "PARLEY_TELEGRAM_ALLOWED_USERS": "42,7"},
    )
    assert access_line(listed).startswith("allowlist: the 2 on PARLEY_TELEGRAM_ALLOWED_USERS")


async def test_a_code_stored_by_the_release_before_is_listed_and_approved(
    redis: aioredis.Redis,
) -> None:
    """The record under a code keeps its form (platform, user and name; the code is its key)."""
    keys, pairings = Keys(), Pairings(redis, Keys())
    written_before = f'{{"platform": "telegram", "user_id": "{BOB}", "name": "Bob"}}'
    await redis.set(keys.pairing_code("ABCD2345"), written_before, ex=60)
    await redis.rpush(keys.pairing_queue("telegram"), "ABCD2345")
    assert [r.name for r in await pairings.pending()] == ["Bob"]
    approved = await pairings.approve("abcd-2345")
    assert approved is not None
    assert (approved.code, approved.user_id) == ("ABCD2345", str(BOB))
    assert await pairings.admitted(str(BOB))
    code = await pairings.code_for(str(CAROL), "Carol")
    assert json.loads(await redis.get(keys.pairing_code(code)) or b"") == {
        "platform": "telegram",
        "user_id": str(CAROL),
        "name": "Carol",
    }
