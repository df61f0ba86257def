"""A Connect link on each platform (the real SDKs against the fakes): a URL button, shown to
the requester alone, and a press on it that Slack reports anyway changes nothing."""

from __future__ import annotations

import json

from agent.builtin_tools import builtin_registry
from agent.tools import QuestionRequired, tool
from tests.adapters.test_slack import slack_bot, until
from tests.adapters.test_telegram import ANA, adapter_for
from tests.agent.scripted import ScriptedModel, call, turn
from tests.bot.harness import running
from tests.fakes import slack as fs
from tests.fakes.telegram import FakeTelegram

LINK = "https://auth.example/authorize?state=s1"


@tool
async def tracker__whoami() -> str:
    """Who am I on the tracker."""
    raise QuestionRequired(
        "Connect your tracker account.", question_id="q1", label="Connect tracker", url=LINK
    )


async def test_slack_sends_the_link_ephemerally_and_ignores_a_press_on_it(redis) -> None:
    model = ScriptedModel([turn(call("tracker__whoami"))])
    async with slack_bot(redis, model, extra_tools=(tracker__whoami,)) as s:
        seen = s.recording()
        await s.event(fs.mention_event("UANA", "<@UBOT> who am I on the tracker?"))
        await until(lambda: any(p.buttons for p in s.fake.in_channel("CGEN")), within=20)
        await s.harness.settle()
        (prompt,) = [p for p in s.fake.in_channel("CGEN") if p.buttons]
        assert prompt.ephemeral_to == "UANA"
        (button,) = prompt.buttons
        assert button["url"] == LINK and "value" not in button
        assert button["text"]["text"] == "Connect tracker"

        handed = len(seen)
        assert (await s.form(fs.block_action(prompt, "Connect tracker", user="UANA"))).status == 200
        await s.harness.settle()
        assert len(seen) == handed  # the press was acknowledged and dropped


async def test_telegram_sends_the_link_as_a_url_button_in_the_private_chat(
    redis, telegram: FakeTelegram
) -> None:
    model = ScriptedModel([turn(call("tracker__whoami"))])
    registry = builtin_registry()
    registry.register(tracker__whoami)
    adapter = adapter_for(telegram)
    async with running(redis, model, adapter=adapter, tools=registry) as harness:  # type: ignore[arg-type]
        adapter.handler = harness.runtime.inbox.submit
        await adapter.start()
        await adapter.start_polling()
        try:
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="who am I?"))
            await until(lambda: bool(telegram.method_calls("sendMessage")), within=20)
            await harness.settle()
        finally:
            await adapter.stop()
    (sent,) = telegram.method_calls("sendMessage")
    keyboard = json.loads(sent.body["reply_markup"])["inline_keyboard"]
    assert keyboard == [[{"text": "Connect tracker", "url": LINK}]]
