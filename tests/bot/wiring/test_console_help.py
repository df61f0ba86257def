"""Every command `/help` offers works in `parley console`: a real console process, typed at
line by line, against the fake Anthropic server (a model that answers by what it is asked)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from redis.asyncio import Redis

from tests.bot.wiring.test_console import start_console
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

WAIT = 30.0  # seconds for one expected line; a run takes well under one
START = 90.0  # seconds for the console to start: Redis, the embedding model, on a busy machine


class Terminal:
    """A console process's stdin and stdout: type a line, wait for what it prints."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.out = ""
        self.seen = 0  # what `expect` has matched up to
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.out += chunk.decode()

    def type(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())

    async def says(self, line: str, *expected: str) -> None:
        """Type `line`, then wait for each of `expected` in turn."""
        self.type(line)
        for text in expected:
            await self.expect(text)

    async def expect(self, text: str, wait: float = WAIT) -> str:
        """Wait until `text` is printed after what was matched before; returns what came
        between."""
        deadline = asyncio.get_running_loop().time() + wait
        while (at := self.out.find(text, self.seen)) < 0:
            if self._reader.done() or asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no {text!r} after:\n{self.out[self.seen :]}")
            await asyncio.sleep(0.05)
        between, self.seen = self.out[self.seen : at], at + len(text)
        return between

    async def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = await asyncio.wait_for(self.process.wait(), WAIT)
        await self._reader
        return code


def answer(body: dict[str, Any]) -> fa.Item:
    """The model: a remember, a schedule or a plain answer, by what was asked."""
    if fa.tool_results(body):
        return fa.text("Done.")
    asked = fa.last_user_text(body)
    if "remember" in asked:
        return fa.tool("remember", text=asked.split("remember that ", 1)[1])
    if asked.startswith("every 2 seconds "):
        objective = asked.removeprefix("every 2 seconds ")
        return fa.tool("schedule", when="every 2 seconds", objective=objective)
    if said := re.search(r"say (tick|tock)", asked):  # a schedule's run: its objective
        return fa.text(said[1])
    return fa.text("Hi there!")


async def test_every_command_help_offers_works_in_the_console(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    mcp = tmp_path / "mcp.json"  # a server each person signs in to: not for the console
    mcp.write_text(
        json.dumps({"mcpServers": {"tracker": {"url": "https://t.example/mcp", "auth": "user"}}})
    )
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.responder = answer
        process = await start_console(
            {
                "REDIS_URL": redis_url,
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": hosted.url,
                "OLLAMA_HOST": local.url,
                "PARLEY_SCHEDULE_MIN_INTERVAL": "1",
                "PARLEY_MCP_CONFIG": str(mcp),
                "PARLEY_SECRET_KEY": Fernet.generate_key().decode(),
                "PARLEY_PUBLIC_URL": "https://parley.example.com",
            },
            stderr=asyncio.subprocess.STDOUT,
        )
        console = Terminal(process)
        await console.expect(
            "(tracker: MCP servers that act as the person who asked are left out", START
        )
        await console.expect("you> ")
        await console.says("/help", "Commands:")
        listing = await console.expect("you> ")
        offered = set(re.findall(r"^• /(\w+)", listing, flags=re.MULTILINE))
        tried = {"help"}

        await console.says("remember that my bike is green", "parley> Done.")
        await console.says("/memories", "1. my bike is green")
        tried.add("memories")
        await console.says(
            "/correct 1 my bike is red",
            "Corrected: “my bike is green” is now “my bike is red”.",
        )
        tried.add("correct")
        console.type("/why")  # the run that remembered it recalled it before answering
        await console.expect("For my last answer here I used what I remember:")
        await console.expect("• my bike is red — you told me in the console on ")
        tried.add("why")
        await console.says("/instructions", "No standing instructions here.")
        tried.add("instructions")
        await console.says("/forget 1", "Forgotten: “my bike is red”")
        await console.says("remember that I take the 8:10 train", "parley> Done.")
        await console.says("/forget all", "Done — I forgot 1 thing you told me.")
        tried.add("forget")

        await console.says("/status", "I'm not working on anything for you right now.")
        await console.expect("Today you've used ")  # the console's runs count too
        tried.add("status")
        await console.says("/cancel", "There's nothing to cancel.")
        tried.add("cancel")

        await console.says("every 2 seconds say tick", "parley wants to:", "Approve? [y/N] ")
        await console.says("y", "parley> Done.")
        await console.expect("tick")  # the schedule's slot, run while the console waits
        await console.says(
            "/schedules",
            "Schedules here:",
            "1. “say tick” · every 2 seconds",
            "  2. Delete 1",
            "a number, or Enter to go on> ",
        )
        await console.says("2", "Deleted schedule")
        await console.says("/schedules", "No schedules here.")
        tried.add("schedules")

        await console.says("/connections", "No tool here needs your own account.")
        tried.add("connections")

        await console.says("every 2 seconds say tock", "Approve? [y/N] ")
        await console.says("yes", "parley> Done.")
        await console.says("/quit", "(1 schedule made here ends with this console session.)")
        code = await console.close()

    assert code == 0, console.out
    assert offered == tried, f"/help offers {offered - tried} that this test never tried"
    assert "Sorry" not in console.out and "Traceback" not in console.out, console.out
    assert [key async for key in redis.scan_iter(match="parley:console:*")] == []


async def test_the_demo_shows_a_question_an_approval_memory_and_a_schedule(
    redis: Redis, redis_url: str
) -> None:
    """`parley console --demo` with no model anywhere: the scripted stand-in, labelled."""
    process = await start_console(
        {
            "REDIS_URL": redis_url,
            "OLLAMA_HOST": "http://127.0.0.1:9",  # nothing listens: no model at all
            "PARLEY_SCHEDULE_MIN_INTERVAL": "1",
        },
        stderr=asyncio.subprocess.STDOUT,
        demo=True,
    )
    console = Terminal(process)
    await console.expect("Demo mode: a scripted stand-in answers, not a language model", START)
    await console.expect("you> ")

    await console.says("pick tea or coffee for me", "parley asks> Tea or Coffee?", "  2. Coffee")
    await console.says("2", "parley> [demo] You chose: Coffee")

    await console.says(
        "remember that my bike is a green Brompton",
        "parley> [demo] Noted — I'll remember that.",
    )
    console.type("what bike do I ride?")  # recall brings the memory to the stand-in
    await console.expect("parley> [demo] From what you told me before: my bike is a green")
    await console.says(
        "what do you remember about me?",
        "parley> [demo] Here is what I remember:",
        "my bike is a green Brompton",
    )

    await console.says("remind me to stretch in 1 second", "parley wants to:", "Approve? [y/N] ")
    await console.says("y", "parley> [demo] Reminder set", "⏰ Reminder: stretch")

    await console.says("every 2 seconds tell me the time", "Approve? [y/N] ")
    await console.says("y", "parley> [demo] Scheduled.", "⏰ Scheduled run")
    await console.expect("[demo] It is ")  # the time, as the stand-in reads it from its prompt
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC\.", console.out[console.seen :])
    await console.says("/quit", "(1 schedule made here ends with this console session.)")
    assert await console.close() == 0, console.out
    assert "Sorry" not in console.out and "Traceback" not in console.out, console.out
