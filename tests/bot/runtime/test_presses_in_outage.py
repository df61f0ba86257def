"""Approve pressed while Redis is away, on Slack and on Telegram: the platform is told the
truth (or is not acknowledged, so it delivers the press again), and once Redis is back the
approved call runs exactly once. A private Redis Stack server is stopped and started again."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from adapters.slack.inbound import PRESS_NOT_TAKEN
from agent.builtin_tools import builtin_registry
from agent.tools import tool
from tests.adapters.test_slack import on_events
from tests.adapters.test_telegram import ANA, adapter_for
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import parley
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.network

SHIPPED: list[str] = []


@tool(side_effects=True, describe=lambda args: f"Ship to {args['target']}")
async def ship(target: str) -> str:
    """Ship the release.

    Args:
        target: where to
    """
    SHIPPED.append(target)
    return "shipped"


@pytest.fixture
def store(
    stoppable: tuple[PrivateRedis, aioredis.Redis],
) -> tuple[PrivateRedis, aioredis.Redis]:
    SHIPPED.clear()
    return stoppable


def tools():  # type: ignore[no-untyped-def]
    registry = builtin_registry()
    registry.register(ship)
    return registry


async def test_a_slack_approve_pressed_while_redis_is_down(
    store: tuple[PrivateRedis, aioredis.Redis],
) -> None:
    server, client = store
    model = ScriptedModel([turn(call("ship", target="prod")), reply("Shipped.")])
    async with FakeSlack() as fake, on_events(client, model, fake, tools=tools()) as slack:
        await slack.event(fs.mention_event("UANA", "ship it"))
        await until(lambda: any(p.buttons for p in fake.in_channel("CGEN")))
        await slack.harness.settle()
        [approval] = [p for p in fake.in_channel("CGEN") if p.buttons]

        await server.down()
        pressed = await slack.form(fs.block_action(approval, "Approve", user="UANA"))
        # Slack never sends a press again: the presser is told, and the press is not acked.
        assert pressed.status == 503
        [note] = [p for p in fake.posts if p.ephemeral_to == "UANA"]
        assert note.text == PRESS_NOT_TAKEN and note.thread_ts == approval.thread_ts
        assert approval.buttons  # still there to press

        await server.up()
        await until(lambda: slack.harness.runtime.worker.reading.state == "ok")
        await slack.harness.settle()
        assert SHIPPED == []  # the press Slack was refused does not come back by itself
        again = await slack.form(fs.block_action(approval, "Approve", user="UANA"))
        assert again.status == 200
        await until(lambda: "Shipped." in [p.text for p in fake.in_channel("CGEN")])
        await slack.harness.settle()
    assert SHIPPED == ["prod"]
    assert [p.text for p in fake.in_channel("CGEN")].count("Shipped.") == 1
    assert "Approved by <@UANA>" in approval.text and not approval.buttons


async def test_a_telegram_approve_pressed_while_redis_is_down(
    store: tuple[PrivateRedis, aioredis.Redis],
    telegram: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.telegram.ingress")
    server, client = store
    model = ScriptedModel([turn(call("ship", target="prod")), reply("Shipped.")])
    async with parley(client, model, chat=adapter_for(telegram), tools=tools()) as harness:
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="ship it"))
        await until(lambda: any(p.buttons for p in telegram.chat(ANA)))
        await harness.settle()
        [approval] = [p for p in telegram.chat(ANA) if p.buttons]

        await server.down()
        press = telegram.click(approval, "Approve", user_id=ANA)
        # polling meets the press while the store is away: held, not confirmed, not answered
        await until(lambda: "Telegram updates degraded (HandoverFailed)" in caplog.text)
        await asyncio.sleep(1)
        assert press in telegram.updates and not telegram.method_calls("answerCallbackQuery")
        assert SHIPPED == []
        await server.up()
        await until(lambda: "Shipped." in [p.text for p in telegram.chat(ANA)])
        await harness.settle()
    assert SHIPPED == ["prod"]
    assert [p.text for p in telegram.chat(ANA)].count("Shipped.") == 1
    assert "Approved by Ana" in approval.text and approval.buttons == []
    [answer] = telegram.method_calls("answerCallbackQuery")  # once it was stored and applied
    assert answer.body["callback_query_id"] == press["callback_query"]["id"]
    assert answer.body["text"] == "Approved" and press not in telegram.updates
    said = [r.getMessage() for r in caplog.records if r.name == "adapters.telegram.ingress"]
    assert [line.split(" (")[0].split(" after")[0] for line in said] == [
        "Telegram updates degraded",
        "Telegram updates recovered",
    ]
