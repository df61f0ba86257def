"""`parley console` runs the same conversation engine as the chat platforms: its commands,
its cancel rule and its sentences reach the terminal."""

from __future__ import annotations

from pathlib import Path

from tests.bot.wiring.terminal import terminal
from tests.fakes import anthropic as fa


async def test_ctrl_c_at_a_question_cancels_it_through_the_engine(
    redis_url: str, tmp_path: Path
) -> None:
    question = fa.tool("ask_user", question="Tea or coffee?", options=["Tea", "Coffee"])
    async with terminal(redis_url, tmp_path, question, fa.text("Fresh start.")) as t:
        await t.says("pick a drink for me", "parley asks> Tea or coffee?", "your answer> ")
        t.ctrl_c()
        await t.shows("parley> Cancelled. What would you like to do next?")
        await t.says("/status", "parley> I'm not working on anything for you right now.")
        await t.says("/nope", "parley> I don't know the command /nope. Try /help.")
        await t.says("hello", "parley> Fresh start.")
        await t.quits()
    # the question was closed as cancelled before the next objective
    sent = str(t.hosted.message_calls[-1].body["messages"])
    assert "Not run: the user cancelled." in sent
    assert len(t.hosted.message_calls) == 2  # the commands never reached the model
