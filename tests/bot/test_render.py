"""Approval prompts show the calls that will run, not what the model says about them."""

from __future__ import annotations

from adapters.slack_format import messages
from adapters.telegram_format import split_html
from agent import Agent, AwaitingApproval, builtin_registry
from agent.protocols import RunContext
from bot.conversation.render import ARG_LIMIT, approval_message, approval_text
from tests.agent.scripted import ScriptedModel, call, turn

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


async def test_long_values_are_cut_visibly() -> None:
    outcome = await injected_plan(args={"text": "x" * 5000, "in_seconds": 60})
    text = approval_text(outcome)
    assert len(text) < 1000
    # the JSON string is 5002 characters with its quotes
    assert f"… [{5002 - ARG_LIMIT} more characters not shown]" in text


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
