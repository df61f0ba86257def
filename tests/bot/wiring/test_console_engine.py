"""`parley console` runs the same conversation engine as the chat platforms: its commands,
its cancel rule and its sentences reach the terminal."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.bot.wiring.test_console_keys import providers, terminal
from tests.fakes import anthropic as fa


async def test_ctrl_c_at_a_question_cancels_it_through_the_engine(
    redis_url: str, tmp_path: Path
) -> None:
    async with providers(
        fa.tool("ask_user", question="Tea or coffee?", options=["Tea", "Coffee"]),
        fa.text("Fresh start."),
    ) as env:
        hosted = env.hosted  # type: ignore[attr-defined]
        async with terminal({**env(tmp_path), "REDIS_URL": redis_url}) as t:
            await t.type("pick a drink for me")
            await t.shows("parley asks> Tea or coffee?")
            await t.shows("your answer> ")
            t.ctrl_c()
            await t.shows("parley> Cancelled. What would you like to do next?")
            await t.type("/status")
            await t.shows("parley> I'm not working on anything for you right now.")
            await t.type("/nope")
            await t.shows("parley> I don't know the command /nope. Try /help.")
            await t.type("hello")
            await t.shows("parley> Fresh start.")
            await t.type("/quit")
            assert await asyncio.wait_for(t.process.wait(), 20) == 0
    # the question was closed as cancelled before the next objective
    sent = str(hosted.message_calls[-1].body["messages"])
    assert "Not run: the user cancelled." in sent
    assert len(hosted.message_calls) == 2  # the commands never reached the model
