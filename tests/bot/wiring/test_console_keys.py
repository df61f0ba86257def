"""`parley console` as a person uses it: Ctrl-C, yes/no answers, and a terminal free of logs.

The console runs as a real process with pipes for stdin and stdout; Ctrl-C is a real SIGINT.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.bot.wiring.terminal import START_UP, terminal
from tests.fakes import anthropic as fa


async def test_ctrl_c_at_the_prompt_leaves_without_waiting_for_enter(
    redis_url: str, tmp_path: Path
) -> None:
    async with terminal(redis_url, tmp_path) as t:
        await t.shows("you> ")
        t.ctrl_c()
        await t.ends(within=10)  # stdin is still open


async def test_ctrl_c_during_a_request_stops_it_like_cancel_and_the_chat_goes_on(
    redis_url: str, tmp_path: Path
) -> None:
    async with terminal(redis_url, tmp_path, fa.hang(), fa.text("Hi again!")) as t:
        await t.shows("you> ")
        await t.type("write me a long essay")
        deadline = time.monotonic() + 30
        while not t.hosted.message_calls:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        t.ctrl_c()  # the same stop as /cancel and the platforms' stop buttons
        await t.shows("Stopped: “write me a long essay”. Nothing more will run for it.")
        await t.shows("you> ")
        await t.says("hello", "parley> Hi again!")
        await t.quits()
    assert len(t.hosted.message_calls) == 2  # the hanging call was abandoned, not retried


async def test_approval_accepts_everyday_yes_and_no_and_asks_again_otherwise(
    redis_url: str, tmp_path: Path
) -> None:
    reminder = fa.tool("create_reminder", text="stretch", in_seconds=3600)
    async with terminal(redis_url, tmp_path, reminder, fa.text("Reminder set.")) as t:
        await t.says("remind me to stretch in an hour", "Approve? [y/N] ")
        await t.says("hmm, maybe", "Please answer yes or no.", "Approve? [y/N] ")
        await t.says("Yes please!", "approved.", "parley> Reminder set.")
        await t.quits()


async def test_library_logs_stay_out_of_the_conversation(redis_url: str, tmp_path: Path) -> None:
    async with terminal(redis_url, tmp_path, fa.text("Hello!"), PARLEY_LOG_LEVEL="DEBUG") as t:
        await t.type("hi")
        await t.quits(within=START_UP + 30)
        assert t.process.stdout is not None and t.process.stderr is not None
        out = (await t.process.stdout.read()).decode()
        err = (await t.process.stderr.read()).decode()
    assert "parley> Hello!" in out
    assert "DEBUG" not in out + err and "INFO" not in out + err
    log = (tmp_path / "console.log").read_text()
    assert "DEBUG" in log  # the logs were written, just not to the terminal
