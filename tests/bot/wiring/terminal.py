"""`parley console` as its own process on pipes, typed into and read like a terminal, against
the fake provider servers."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
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
    def __init__(self, process: asyncio.subprocess.Process, hosted: FakeAnthropic) -> None:
        self.process = process
        self.hosted = hosted  # the hosted model's fake: what the console sent it
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

    async def says(self, line: str, *shown: str) -> None:
        """Type `line`, then wait for each of `shown` in turn."""
        await self.type(line)
        for text in shown:
            await self.shows(text)

    async def ends(self, within: float = 20.0) -> None:
        """The console exits cleanly (status 0) within `within` seconds."""
        assert await asyncio.wait_for(self.process.wait(), within) == 0

    async def quits(self, within: float = 20.0) -> None:
        """/quit, and the console exits cleanly."""
        await self.type("/quit")
        await self.ends(within)

    def ctrl_c(self) -> None:
        self.process.send_signal(signal.SIGINT)


@asynccontextmanager
async def terminal(
    redis_url: str, data_dir: Path, *script: fa.Scripted, **env: str
) -> AsyncIterator[Terminal]:
    """`parley console` on Redis at `redis_url`, its data in `data_dir`, the hosted model
    answering `script` (a local model is there too), with `env` for more settings."""
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(*script)
        settings = {
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": hosted.url,
            "OLLAMA_HOST": local.url,
            "PARLEY_DATA_DIR": str(data_dir),
            "REDIS_URL": redis_url,
            **env,
        }
        process = await start_console(settings, stderr=asyncio.subprocess.PIPE)
        try:
            yield Terminal(process, hosted)
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()
