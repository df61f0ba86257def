"""Who Parley pings in a Telegram group: a model obeying planted text cannot notify members
by `@username`; the names the requester typed still ping. Sends, edits and streamed updates
render through one function (`split_html`)."""

from __future__ import annotations

from adapters.telegram.format import split_html
from tests.adapters.test_telegram import ANA, GROUP, bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram

PLANTED = "Done. @alice_admin @everyone_here read this now, cc @bob_smith. Mail ana@example.com"


async def test_a_model_cannot_ping_group_members(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply(PLANTED)])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=ANA,
                text=f"@{BOT_USERNAME} summarise this for @bob_smith",
                chat_type="supergroup",
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
        (sent,) = telegram.chat(GROUP)
        assert "@alice_admin" not in sent.text and "@\u2060alice_admin" in sent.text
        assert "@\u2060everyone_here" in sent.text
        assert "@bob_smith" in sent.text  # typed by the requester: it may ping
        assert "ana@example.com" in sent.text  # an address is not a mention


def test_every_rendered_part_follows_the_rule() -> None:
    long = (PLANTED + "\n\n") * 200  # several messages
    parts = split_html(long, 4096, frozenset({"@bob_smith"}))
    assert len(parts) > 1
    for part in parts:
        assert "@alice_admin" not in part and "@bob_smith" in part
    code = split_html("`@alice_admin`")[0]
    assert "@alice_admin" in code  # inside code Telegram links nobody
