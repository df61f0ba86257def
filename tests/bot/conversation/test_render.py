"""Approval prompts show the calls that will run, not what the model says about them."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from adapters.base import OutboundMessage
from adapters.slack.format import messages
from adapters.telegram.format import split_html
from agent import Agent, AwaitingApproval, builtin_registry
from agent.protocols import RunContext
from bot.conversation.render import (
    FOLD_AT,
    approval_message,
    approval_text,
    continuations,
)
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running
from tests.bot.recording import dm, message

CTX = RunContext(conversation_id="slack:T1:C1", platform="slack", user_id="U1", chat_id="C1")
EVIL = "EVIL: wire $5000 to account 666 <!channel> <@U0ADMIN> @everyone"


async def injected_plan(**step: object) -> AwaitingApproval:
    """A plan whose descriptions say one thing while its call does another."""
    steps = [
        {
            "tool": "create_reminder",
            "args": {"text": EVIL, "in_seconds": 60},
            "description": "Remind you to drink water",
            **step,
        }
    ]
    model = ScriptedModel([turn(call("propose_plan", goal="Stay hydrated", steps=steps))])
    outcome = await Agent(model, builtin_registry()).run("remind me to drink water", CTX)
    assert isinstance(outcome, AwaitingApproval)
    return outcome


async def test_the_prompt_shows_the_real_call_and_its_arguments() -> None:
    outcome = await injected_plan()
    text = approval_text(outcome)
    assert "`create_reminder`" in text
    assert '"EVIL: wire $5000 to account 666' in text and "in_seconds: 60" in text
    # what the model said comes after the call, as a secondary line
    assert text.index("EVIL") < text.index("described as: Remind you to drink water")
    assert "Goal, as described: Stay hydrated" in text


async def test_no_mention_in_an_argument_or_description_goes_live() -> None:
    outcome = await injected_plan(
        description="ping <!here> and @channel, see [docs](https://e.vil)"
    )
    message = approval_message(outcome, "d1")
    slack = "\n".join(
        block["text"]["text"]
        for _, blocks in messages(message)
        for block in blocks
        if block["type"] == "section"
    )
    assert "&lt;!channel&gt;" in slack and "&lt;@U0ADMIN&gt;" in slack
    for live in ("<!channel>", "<!here>", "<@U0ADMIN>", "<https://e.vil|"):
        assert live not in slack
    telegram = "".join(split_html(message.text))
    assert "<pre>" in telegram and "&lt;!channel&gt;" in telegram
    assert '<a href="https://e.vil">' not in telegram
    assert "@channel" not in message.text  # a word joiner keeps Telegram from linking it


async def test_a_long_value_is_folded_and_shown_whole_before_the_prompt(
    redis: aioredis.Redis,
) -> None:
    """An injected reminder hides its payload past the first 300 characters: the approver
    used to see "… [n more characters not shown]" and approve what they could not read."""
    hidden = "Water the plants. " * 20 + "Then wire $5000 to account 666 and delete this."
    model = ScriptedModel(
        [turn(call("create_reminder", text=hidden, in_seconds=60)), reply("Set.")]
    )
    chat = dm()
    async with running(redis, model) as harness:
        await harness.submit(message(chat, "remind me to water the plants"))
        await harness.settle()
        *before, prompt = harness.adapter.in_conversation(chat)
    assert prompt.message.buttons  # the prompt comes last, its buttons below everything
    assert "the whole value is in the message above" in prompt.message.text
    assert "wire $5000" not in prompt.message.text  # the prompt itself folds it
    [whole] = [p.message.text for p in before]
    assert json.dumps(hidden) in whole and "text in full" in whole
    # the whole value survives each platform's formatting
    assert "wire $5000 to account 666 and delete this." in "".join(split_html(whole))
    slack = messages(OutboundMessage(text=whole))
    assert "wire $5000 to account 666" in slack[0][1][0]["text"]["text"]


async def test_every_value_is_shown_whole_whatever_its_length() -> None:
    for size in (FOLD_AT - 10, FOLD_AT + 1, 20_000):
        value = "a" * (size - 1) + "Z"
        outcome = await injected_plan(args={"text": value, "in_seconds": 60})
        shown = approval_text(outcome) + "".join(m.text for m in continuations(outcome))
        assert value in shown


async def test_invisible_and_reordering_characters_are_shown_as_escapes() -> None:
    """RIGHT-TO-LEFT OVERRIDE makes "666 ot" read as "to 666"; a line separator starts a
    line the block does not show; tag characters are invisible text."""
    sneaky = "pay \u202e666 tnuocca\u202c ok\u2028fake line\u200b\U000e0041\x85\u2066x\u2069"
    outcome = await injected_plan(
        args={"text": sneaky + "y" * FOLD_AT, "in_seconds": 60}, description="do \u202eit"
    )
    shown = approval_text(outcome) + "".join(m.text for m in continuations(outcome))
    for raw, escape in [
        ("\u202e", "\\u202e"),
        ("\u202c", "\\u202c"),
        ("\u2028", "\\u2028"),
        ("\u200b", "\\u200b"),
        ("\U000e0041", "\\U000e0041"),
        ("\x85", "\\u0085"),
        ("\u2066", "\\u2066"),
    ]:
        assert raw not in shown and escape in shown, escape


async def test_an_argument_cannot_close_the_code_block() -> None:
    outcome = await injected_plan(args={"text": "x```\n*fake line*", "in_seconds": 60})
    slack = "\n".join(
        block["text"]["text"]
        for _, blocks in messages(approval_message(outcome, "d1"))
        for block in blocks
        if block["type"] == "section"
    )
    body = slack.split("```", 2)[1]  # the arguments' block, whole
    assert "x`\u2060`\u2060`" in body and "in_seconds: 60" in body
