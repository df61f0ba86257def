"""Approved side effects across crashes, with real `parley` processes, a real Redis Stack and
Telegram and Anthropic played by local servers: kill -9 or a SIGTERM whose drain timeout
elapses while an approved tool runs, and a death after the tool finished but before the
answer went out. The tool runs once, or the user is told plainly that it may or may not have
happened and asked again — never run a second time silently."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.ops.shutdown import STUCK_EXIT
from tests.e2e.test_processes import Cluster, free_port, texts, until
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic, last_user_text, tool_results
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.e2e

ANA = 42
GRACE = 8  # PARLEY_STOP_GRACE: after the 1 s drain, for cancelled runs and closing

# A side effect that leaves a line per start and per end, and holds until released.
SKILL = '''
import asyncio
import time
from pathlib import Path

from agent.tools import ToolContext, tool

LOG = Path({log!r})
RELEASE = Path({release!r})
STUBBORN = RELEASE.with_name("stubborn")  # the tool swallows its cancellation
BLOCKING = RELEASE.with_name("blocking")  # the tool holds the event loop


def note(line: str) -> None:
    with LOG.open("a") as handle:
        handle.write(line + "\\n")


@tool(side_effects=True, describe=lambda args: f"Record {{args['marker']}}")
async def record_run(marker: str, ctx: ToolContext) -> str:
    """Record that the approved action ran.

    Args:
        marker: what to record
    """
    note(f"start {{marker}} {{ctx.idempotency_key}}")
    while not RELEASE.exists():
        if BLOCKING.exists():
            time.sleep(0.05)
            continue
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            if not STUBBORN.exists():
                raise
    note(f"end {{marker}}")
    return f"recorded {{marker}}"
'''


def script(body: dict[str, Any], answer_delay: float = 0.0) -> fa.Item:
    results = tool_results(body)
    if results:
        content = str(results[0].get("content"))
        if found := re.search(r"recorded \w+", content):
            return fa.text(f"done: {found.group(0)}", delay=answer_delay)
        if "may or may not have happened" in content:
            return fa.text("Understood, I won't try it again.")
        return fa.text("something else happened")
    text = last_user_text(body)
    if text.startswith("approve"):
        return fa.tool("record_run", marker=text.split()[-1])
    return fa.text(f"echo: {text}")


@dataclass
class World:
    cluster: Cluster
    telegram: FakeTelegram
    hosted: FakeAnthropic
    log: Path
    release: Path

    def runs(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
async def world(redis_url: str, redis: aioredis.Redis, tmp_path: Path) -> AsyncIterator[World]:
    skills = tmp_path / "skills"
    skills.mkdir()
    log, release = tmp_path / "ran.log", tmp_path / "release"
    (skills / "record.py").write_text(SKILL.format(log=str(log), release=str(release)))
    async with FakeTelegram() as telegram, FakeAnthropic() as hosted:
        hosted.responder = script
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PARLEY_", "ANTHROPIC_", "OLLAMA_", "TELEGRAM_", "SLACK_"))
        }
        env = {
            **base,
            "REDIS_URL": redis_url,
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "PARLEY_TELEGRAM_ACCESS": "open",  # these tests talk as anyone
            "TELEGRAM_API_URL": telegram.url,
            "PARLEY_TELEGRAM_POLL_TIMEOUT": "1",
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": hosted.url,
            "OLLAMA_HOST": f"http://127.0.0.1:{free_port()}",
            "PARLEY_RECLAIM_IDLE": "1",
            "PARLEY_LOCK_LEASE": "1.5",
            "PARLEY_DRAIN_TIMEOUT": "1",
            "PARLEY_STOP_GRACE": str(GRACE),
            "PARLEY_TOOL_TIMEOUT": "120",
            "PARLEY_SKILLS_DIR": str(skills),
            "PARLEY_RATE_LIMIT_PER_MINUTE": "1000",
        }
        cluster = Cluster(env, tmp_path)
        try:
            yield World(cluster, telegram, hosted, log, release)
        finally:
            await cluster.stop_all()


async def approve_and_wait_for(world: World, line: str) -> asyncio.subprocess.Process:
    """Start a process, ask for the action, approve it, and wait until the log shows `line`."""
    process = await world.cluster.start("run")
    await world.cluster.ready(process)
    world.telegram.push(world.telegram.message(chat_id=ANA, user_id=ANA, text="approve alpha"))
    await until(lambda: bool(world.telegram.chat(ANA)))
    prompt = world.telegram.chat(ANA)[0]
    assert "Record alpha" in prompt.text
    world.telegram.click(prompt, "Approve", user_id=ANA)
    await until(lambda: any(run.startswith(line) for run in world.runs()))
    return process


async def assert_asked_again(world: World) -> None:
    """After a restart: the truthful notice and a fresh Approve/Reject, no second run."""
    again = await world.cluster.start("run")
    await world.cluster.ready(again)
    await until(lambda: len(world.telegram.chat(ANA)) == 3, within=40)
    await asyncio.sleep(1)
    assert [run.split()[0] for run in world.runs()] == ["start"]  # never re-run on its own
    notice, retry = world.telegram.chat(ANA)[1:]
    assert "can't tell whether it happened" in notice.text and "Record alpha" in notice.text
    assert [b["text"] for b in retry.buttons] == ["Approve", "Reject"]
    assert not any("went wrong" in text for text in texts(world.telegram, ANA))


async def test_kill_9_during_an_approved_action_asks_before_running_it_again(
    world: World,
) -> None:
    first = await approve_and_wait_for(world, "start alpha")
    first.kill()
    await first.wait()
    world.release.touch()

    await assert_asked_again(world)
    world.telegram.click(world.telegram.chat(ANA)[2], "Approve", user_id=ANA)
    await until(lambda: len(world.telegram.chat(ANA)) == 4, within=30)
    await asyncio.sleep(1)
    assert texts(world.telegram, ANA)[3] == "done: recorded alpha"
    starts = [run for run in world.runs() if run.startswith("start")]
    assert len(starts) == 2 and world.runs().count("end alpha") == 1
    assert starts[0].split()[-1] == starts[1].split()[-1]  # one idempotency key throughout


async def test_sigterm_whose_drain_elapses_mid_action_asks_before_running_it_again(
    world: World,
) -> None:
    first = await approve_and_wait_for(world, "start alpha")
    assert await world.cluster.stop(first, signal.SIGTERM) == 0  # drain timeout: 1 s
    world.release.touch()

    await assert_asked_again(world)
    world.telegram.click(world.telegram.chat(ANA)[2], "Reject", user_id=ANA)
    await until(lambda: len(world.telegram.chat(ANA)) == 4, within=30)
    await asyncio.sleep(1)
    assert texts(world.telegram, ANA)[3] == "Understood, I won't try it again."
    assert world.runs() == [world.runs()[0]]  # the one interrupted start, nothing more


@pytest.mark.parametrize("tool", ["stubborn", "blocking"])
async def test_a_sigterm_ends_the_process_in_bounded_time_whatever_the_tool_does(
    world: World, tool: str
) -> None:
    """A tool that swallows its cancellation is left behind and the stop goes on; one that
    holds the event loop is ended by the watchdog at drain + grace. Either way the line says
    what still ran, and after the restart the user is asked before it runs again."""
    world.release.with_name(tool).touch()
    first = await approve_and_wait_for(world, "start alpha")
    signalled = time.monotonic()
    code = await world.cluster.stop(first, signal.SIGTERM, within=30)
    took = time.monotonic() - signalled
    if tool == "stubborn":
        assert code == 0 and took < 1 + GRACE  # before the watchdog: the stop was orderly
    else:
        assert code == STUCK_EXIT and 1 + GRACE - 0.5 < took < 1 + GRACE + 5
    said = [line for line in world.cluster.tail(first).splitlines() if "still running" in line]
    assert any("in record_run at " in line and "skills/record.py" in line for line in said)
    world.release.touch()
    world.release.with_name(tool).unlink()

    await assert_asked_again(world)


async def test_a_finished_action_is_reused_when_the_process_died_before_answering(
    world: World, redis: aioredis.Redis
) -> None:
    world.release.touch()
    world.hosted.responder = lambda body: script(body, answer_delay=8.0)
    first = await approve_and_wait_for(world, "end alpha")

    async def journaled() -> bool:
        async for key in redis.scan_iter("parley:conv:*:journal:*"):
            found = (await redis.hgetall(key)).values()
            return any(json.loads(v)["finished"] for v in found)
        return False

    for _ in range(200):
        if await journaled():
            break
        await asyncio.sleep(0.05)
    assert await journaled()
    first.kill()
    await first.wait()
    assert len(world.telegram.chat(ANA)) == 1  # only the prompt: the answer never went out

    world.hosted.responder = script
    again = await world.cluster.start("run")
    await world.cluster.ready(again)
    await until(lambda: len(world.telegram.chat(ANA)) == 2, within=40)
    await asyncio.sleep(1.5)
    assert texts(world.telegram, ANA)[1:] == ["done: recorded alpha"]
    assert [run.split()[0] for run in world.runs()] == ["start", "end"]  # ran once
