"""`parley console` as a person uses it: Ctrl-C, yes/no answers, and a terminal free of logs.

The console runs as a real process with pipes for stdin and stdout; Ctrl-C is a real SIGINT.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from tests.bot.wiring.test_console import start_console
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

# A console's first screen waits for it to start: on a loaded two-core machine importing
# and connecting took 37 s of wall time for 3.5 s of CPU.
START_UP = 90.0


class Terminal:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.screen = ""
        self.started = False  # something has been shown

    async def type(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def shows(self, text: str, within: float = 30.0) -> None:
        """Wait until `text` has appeared on the screen since the last `shows` matched (and,
        before anything was shown, for the console to start)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + within + (0.0 if self.started else START_UP)
        while text not in self.screen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"never showed {text!r}; screen:\n{self.screen}"
            try:
                chunk = await asyncio.wait_for(self.process.stdout.read(4096), remaining)
            except TimeoutError:
                continue
            assert chunk, f"the console ended before showing {text!r}; screen:\n{self.screen}"
            self.screen += chunk.decode()
            self.started = True
        self.screen = self.screen[self.screen.index(text) + len(text) :]

    def ctrl_c(self) -> None:
        self.process.send_signal(signal.SIGINT)


@asynccontextmanager
async def terminal(env: dict[str, str]) -> AsyncIterator[Terminal]:
    process = await start_console(env, stderr=asyncio.subprocess.PIPE)
    try:
        yield Terminal(process)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


@asynccontextmanager
async def providers(*script: fa.Scripted) -> AsyncIterator[Callable[[Path], dict[str, str]]]:
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(*script)

        def env(data_dir: Path) -> dict[str, str]:
            return {
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": hosted.url,
                "OLLAMA_HOST": local.url,
                "PARLEY_DATA_DIR": str(data_dir),
            }

        env.hosted = hosted  # type: ignore[attr-defined]
        yield env


async def test_ctrl_c_at_the_prompt_leaves_without_waiting_for_enter(
    redis_url: str, tmp_path: Path
) -> None:
    async with providers() as env, terminal({**env(tmp_path), "REDIS_URL": redis_url}) as t:
        await t.shows("you> ")
        t.ctrl_c()
        assert await asyncio.wait_for(t.process.wait(), 10) == 0  # stdin is still open


async def test_ctrl_c_during_a_request_stops_it_like_cancel_and_the_chat_goes_on(
    redis_url: str, tmp_path: Path
) -> None:
    async with providers(fa.hang(), fa.text("Hi again!")) as env:
        hosted = env.hosted  # type: ignore[attr-defined]
        async with terminal({**env(tmp_path), "REDIS_URL": redis_url}) as t:
            await t.shows("you> ")
            await t.type("write me a long essay")
            deadline = time.monotonic() + 30
            while not hosted.message_calls:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            t.ctrl_c()  # the same stop as /cancel and the platforms' stop buttons
            await t.shows("Stopped: “write me a long essay”. Nothing more will run for it.")
            await t.shows("you> ")
            await t.type("hello")
            await t.shows("parley> Hi again!")
            await t.type("/quit")
            assert await asyncio.wait_for(t.process.wait(), 20) == 0
        assert len(hosted.message_calls) == 2  # the hanging call was abandoned, not retried


async def test_approval_accepts_everyday_yes_and_no_and_asks_again_otherwise(
    redis_url: str, tmp_path: Path
) -> None:
    async with (
        providers(
            fa.tool("create_reminder", text="stretch", in_seconds=3600),
            fa.text("Reminder set."),
        ) as env,
        terminal({**env(tmp_path), "REDIS_URL": redis_url}) as t,
    ):
        await t.type("remind me to stretch in an hour")
        await t.shows("Approve? [y/N] ")
        await t.type("hmm, maybe")
        await t.shows("Please answer yes or no.")
        await t.shows("Approve? [y/N] ")
        await t.type("Yes please!")
        await t.shows("approved.")
        await t.shows("parley> Reminder set.")
        await t.type("/quit")
        assert await asyncio.wait_for(t.process.wait(), 20) == 0


async def test_library_logs_stay_out_of_the_conversation(redis_url: str, tmp_path: Path) -> None:
    async with providers(fa.text("Hello!")) as env:
        environment = {**env(tmp_path), "REDIS_URL": redis_url, "PARLEY_LOG_LEVEL": "DEBUG"}
        async with terminal(environment) as t:
            await t.type("hi")
            await t.type("/quit")
            assert await asyncio.wait_for(t.process.wait(), START_UP + 30) == 0
            assert t.process.stdout is not None and t.process.stderr is not None
            out = (await t.process.stdout.read()).decode()
            err = (await t.process.stderr.read()).decode()
    assert "parley> Hello!" in out
    assert "DEBUG" not in out + err and "INFO" not in out + err
    log = (tmp_path / "console.log").read_text()
    assert "DEBUG" in log  # the logs were written, just not to the terminal
