"""Real `parley` processes on a real Redis Stack, with Telegram and Anthropic played by local
servers: crashes, restarts, scale-out and draining."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.exceptions import ResponseError

from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic, last_user_text, tool_results
from tests.fakes.mcp_process import ROOT
from tests.fakes.telegram import FakeTelegram
from tests.helpers import free_port, until

pytestmark = pytest.mark.e2e

SKILL = '''
from pathlib import Path

from agent.tools import tool

LOG = Path({log!r})


@tool(side_effects=True, describe=lambda args: f"Record {{args['marker']}}")
async def record_run(marker: str) -> str:
    """Record that the approved action ran.

    Args:
        marker: what to record
    """
    with LOG.open("a") as handle:
        handle.write(marker + "\\n")
    return f"recorded {{marker}}"
'''


def script(body: dict[str, Any]) -> fa.Item:
    """The scripted model: what it answers depends on what the user wrote."""
    results = tool_results(body)
    if results and (read := re.search(r"proc: [^<]*", str(results[0].get("content")))):
        return fa.text(read.group(0)[:3000])  # what an MCP server read of its parent
    if results:
        found = re.search(
            r"recorded \w+|scheduled|[Rr]eminder|deleted .*|still running",
            str(results[0].get("content")),
        )
        return fa.text(f"done: {found.group(0) if found else 'something went wrong'}")
    text = last_user_text(body)
    if text.startswith("very slow"):
        return fa.text(f"very slow answer to {text}", delay=30.0)
    if text.startswith("slow"):
        return fa.text(f"slow answer to {text}", delay=3.0)
    if text.startswith("approve"):
        return fa.tool("record_run", marker=text.split()[-1])
    if text.startswith("steal"):  # obeying a message: "steal <environ|mem> <needle>"
        _, part, needle = text.split()
        return fa.tool("local__read_parent", part=part, needle=needle)
    if text.startswith("mcp long"):
        return fa.tool("files__long_job", seconds=3)
    if text.startswith("mcp delete"):
        return fa.tool("files__delete_item", item=text.split()[-1])
    if text.startswith("remind"):
        return fa.tool("create_reminder", text="stand up", in_seconds=1)
    return fa.text(f"echo: {text}")


class Cluster:
    """Starts and stops parley processes sharing one Redis and the fake servers."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.processes: list[asyncio.subprocess.Process] = []

    async def start(self, role: str, **extra: str) -> asyncio.subprocess.Process:
        log = (self.logs / f"{role}-{len(self.processes)}.log").open("wb")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.cli",
            "--env-file",
            "/dev/null",
            role,
            env={
                **self.env,
                "PARLEY_HTTP_PORT": str(free_port()),
                "PARLEY_METRICS_PORT": "0",
                **extra,
            },
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
        log.close()
        self.processes.append(process)
        return process

    async def ready(self, process: asyncio.subprocess.Process, within: float = 60) -> None:
        path = self.log_of(process)
        deadline = time.monotonic() + within
        while b"Parley is running" not in path.read_bytes():
            assert process.returncode is None, path.read_text()
            assert time.monotonic() < deadline, path.read_text()
            await asyncio.sleep(0.1)

    def log_of(self, process: asyncio.subprocess.Process) -> Path:
        return next(self.logs.glob(f"*-{self.processes.index(process)}.log"))

    async def stop(
        self, process: asyncio.subprocess.Process, sig: int = signal.SIGTERM, within: float = 60
    ) -> int:
        """Signal `process` and return its exit status; its log is shown should it not exit
        within `within` seconds, or exit non-zero on a SIGTERM or SIGINT."""
        if process.returncode is None:
            process.send_signal(sig)
        try:
            code = await asyncio.wait_for(process.wait(), within)
        except TimeoutError:
            raise AssertionError(
                f"still running {within} s after {sig}:\n{self.tail(process)}"
            ) from None
        if code != 0 and sig in (signal.SIGTERM, signal.SIGINT):
            print(f"exit status {code} after {sig}:\n{self.tail(process)}")  # shown on failure
        return code

    def tail(self, process: asyncio.subprocess.Process) -> str:
        return self.log_of(process).read_text(errors="replace")[-8000:]

    async def stop_all(self) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.fixture
async def world(
    redis_url: str, redis, tmp_path: Path
) -> AsyncIterator[tuple[Cluster, FakeTelegram, Path]]:
    skills = tmp_path / "skills"
    skills.mkdir()
    ran = tmp_path / "ran.log"
    (skills / "record.py").write_text(SKILL.format(log=str(ran)))
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
            "PARLEY_DRAIN_TIMEOUT": "10",
            "PARLEY_SKILLS_DIR": str(skills),
            "PARLEY_RATE_LIMIT_PER_MINUTE": "1000",
        }
        cluster = Cluster(env, tmp_path)
        try:
            yield cluster, telegram, ran
        finally:
            await cluster.stop_all()


async def a_slow_entry_on_two_workers(
    cluster: Cluster, telegram: FakeTelegram, redis: Any
) -> asyncio.subprocess.Process:
    """A gateway and two workers; "slow please" sent: the worker that holds its entry."""
    gateway = await cluster.start("gateway")
    workers = [await cluster.start("worker") for _ in range(2)]
    for process in [gateway, *workers]:
        await cluster.ready(process)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="slow please"))
    return await holder_of_the_entry(redis, workers)


async def holder_of_the_entry(
    redis: Any, workers: list[asyncio.subprocess.Process]
) -> asyncio.subprocess.Process:
    """The worker whose consumer has the inbox's one entry pending (its name holds its pid)."""
    deadline = time.monotonic() + 20
    while True:
        assert time.monotonic() < deadline
        try:
            pending = await redis.xpending_range("parley:inbox", "workers", "-", "+", 10)
        except ResponseError as exc:  # a worker says it runs before its task makes the group
            assert "NOGROUP" in str(exc)
            pending = []
        if pending:
            pid = int(pending[0]["consumer"].decode().split("-")[-2])
            if (holder := next((w for w in workers if w.pid == pid), None)) is not None:
                return holder
        await asyncio.sleep(0.05)


def texts(telegram: FakeTelegram, chat: int) -> list[str]:
    return [p.text for p in telegram.chat(chat)]


async def test_a_worker_killed_mid_run_is_replaced_and_the_user_gets_one_reply(
    world, redis
) -> None:
    cluster, telegram, _ = world
    # the worker holding the entry is killed while the model is still thinking
    holder = await a_slow_entry_on_two_workers(cluster, telegram, redis)
    await asyncio.sleep(0.5)
    holder.kill()
    await holder.wait()
    await until(lambda: bool(telegram.chat(42)), within=30)
    await asyncio.sleep(2)
    assert texts(telegram, 42) == ["slow answer to slow please"]


async def test_a_worker_paused_past_its_lease_does_not_answer_after_the_one_that_took_over(
    world, redis
) -> None:
    """SIGSTOP of the worker running an entry is its event loop stalled past the lock's
    lease: the other worker reclaims the entry and answers; the paused one, let go on with
    the model's answer waiting, posts nothing and says no "Sorry"."""
    cluster, telegram, _ = world
    holder = await a_slow_entry_on_two_workers(cluster, telegram, redis)
    await asyncio.sleep(0.5)  # the model is thinking (3 s)
    holder.send_signal(signal.SIGSTOP)
    try:
        await until(lambda: bool(telegram.chat(42)), within=30)  # the other worker answered
        await asyncio.sleep(3)  # the paused worker's model answer is waiting for it
    finally:
        holder.send_signal(signal.SIGCONT)
    await asyncio.sleep(4)
    assert texts(telegram, 42) == ["slow answer to slow please"]


async def test_a_pending_approval_survives_a_full_restart(world) -> None:
    cluster, telegram, ran = world
    first = await cluster.start("run")
    await cluster.ready(first)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="approve alpha"))
    await until(lambda: bool(telegram.chat(42)))
    approval = telegram.chat(42)[0]
    assert "Record alpha" in approval.text and approval.buttons
    assert await cluster.stop(first) == 0

    second = await cluster.start("run")
    await cluster.ready(second)
    telegram.click(approval, "Approve", user_id=42)
    await until(lambda: len(telegram.chat(42)) == 2)
    await asyncio.sleep(1)
    assert ran.read_text().splitlines() == ["alpha"]
    assert texts(telegram, 42)[1] == "done: recorded alpha"
    assert "Approved by Ana" in approval.text


async def test_two_gateways_three_workers_and_a_hundred_conversations(world, redis) -> None:
    cluster, telegram, _ = world
    processes = [await cluster.start("gateway") for _ in range(2)]
    processes += [await cluster.start("worker") for _ in range(3)]
    for process in processes:
        await cluster.ready(process)
    users = range(1000, 1100)
    for user in users:
        telegram.push(telegram.message(chat_id=user, user_id=user, text=f"hello from {user}"))
    await until(lambda: all(telegram.chat(u) for u in users), within=60)
    await asyncio.sleep(1.5)
    for user in users:
        assert texts(telegram, user) == [f"echo: hello from {user}"]
    # one gateway holds the polling lease; the other stands by
    assert await redis.get("parley:lease:telegram-polling") is not None
    deletes = telegram.method_calls("deleteWebhook")
    assert len(deletes) == 1  # only the lease holder started polling


async def test_a_reminder_is_posted_once_with_three_workers(world) -> None:
    cluster, telegram, _ = world
    processes = [await cluster.start("gateway")] + [await cluster.start("worker") for _ in range(3)]
    for process in processes:
        await cluster.ready(process)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="remind me to stand up"))
    await until(lambda: bool(telegram.chat(42)))
    telegram.click(telegram.chat(42)[0], "Approve", user_id=42)
    await until(lambda: any("Reminder" in t for t in texts(telegram, 42)), within=20)
    await asyncio.sleep(3)
    assert [t for t in texts(telegram, 42) if "Reminder" in t] == ["⏰ Reminder for Ana: stand up"]


async def test_sigterm_during_a_run_loses_nothing(world) -> None:
    cluster, telegram, _ = world
    process = await cluster.start("run")
    await cluster.ready(process)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="slow but sure"))
    await asyncio.sleep(1.0)  # the run is under way, the model still thinking
    assert await cluster.stop(process) == 0
    if not telegram.chat(42):  # handed back unfinished: the next process picks it up
        again = await cluster.start("run")
        await cluster.ready(again)
        await until(lambda: bool(telegram.chat(42)), within=30)
        await asyncio.sleep(1)
    assert texts(telegram, 42) == ["slow answer to slow but sure"]


async def test_cancel_reaches_a_run_on_another_worker_process(world, redis) -> None:
    """The gateway stores the /cancel; whichever worker reads it signals the run, which may
    be working on the other worker: it stops there, at once, and says so."""
    cluster, telegram, _ = world
    gateway = await cluster.start("gateway")
    workers = [await cluster.start("worker") for _ in range(2)]
    for process in [gateway, *workers]:
        await cluster.ready(process)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="very slow essay"))
    deadline = time.monotonic() + 20
    while not await redis.xpending_range("parley:inbox", "workers", "-", "+", 10):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the model is thinking (for 30 s)
    started = time.monotonic()
    telegram.push(telegram.message(chat_id=42, user_id=42, text="/cancel"))
    await until(lambda: bool(telegram.chat(42)), within=20)
    assert time.monotonic() - started < 20  # not after the model's 30 s
    await asyncio.sleep(1)
    assert texts(telegram, 42) == ["⏹ Stopped: “very slow essay”. Nothing more will run for it."]


async def test_mcp_servers_start_with_the_worker_and_stop_on_sigterm(world, tmp_path) -> None:
    cluster, telegram, _ = world
    ledger, pids = tmp_path / "mcp-ledger", tmp_path / "mcp-pids"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": sys.executable,
                        "args": ["-m", "tests.fakes.mcp_server"],
                        "cwd": str(ROOT),
                        "env": {"MCP_LEDGER": "${LEDGER}", "MCP_PIDFILE": str(pids)},
                    },
                    "gone": {"command": "/nonexistent/mcp-server"},
                }
            }
        )
    )
    port = free_port()
    process = await cluster.start(
        "run", PARLEY_MCP_CONFIG=str(config), LEDGER=str(ledger), PARLEY_METRICS_PORT=str(port)
    )
    await cluster.ready(process)

    async def mcp_detail() -> str:
        async with (
            aiohttp.ClientSession() as client,
            client.get(f"http://127.0.0.1:{port}/readyz") as response,
        ):
            return str((await response.json())["checks"]["mcp"]["detail"])

    deadline = time.monotonic() + 30
    while not (await mcp_detail()).startswith("1/2 servers ready; gone down"):
        assert time.monotonic() < deadline, await mcp_detail()
        await asyncio.sleep(0.2)

    telegram.push(telegram.message(chat_id=42, user_id=42, text="mcp delete invoice7"))
    await until(lambda: bool(telegram.chat(42)))
    approval = telegram.chat(42)[0]
    assert "files__delete_item" in approval.text and "invoice7" in approval.text
    assert not ledger.exists()
    telegram.click(approval, "Approve", user_id=42)
    await until(lambda: len(telegram.chat(42)) == 2)
    assert texts(telegram, 42)[1] == "done: deleted 1 x invoice7"
    assert ledger.read_text().splitlines() == ["delete_item invoice7 1"]

    (pid,) = [int(line) for line in pids.read_text().split()]
    assert await cluster.stop(process) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server Parley started has exited with it


async def test_a_long_mcp_task_is_followed_by_the_running_service(world, tmp_path) -> None:
    """`parley run` hands a task that outlives its 1 s call to its follower, which posts the
    result in the chat when the server finishes it."""
    cluster, telegram, _ = world
    config = tmp_path / "mcp.json"
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server"],
        "cwd": str(ROOT),
        "env": {"MCP_TASKS": "1"},
        "timeout": 1,
    }
    config.write_text(json.dumps({"mcpServers": {"files": server}}))
    process = await cluster.start("run", PARLEY_MCP_CONFIG=str(config))
    await cluster.ready(process)
    [log] = cluster.logs.glob(f"*-{cluster.processes.index(process)}.log")
    await until(lambda: b"MCP server files ready" in log.read_bytes(), within=60)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="mcp long job"))
    await until(lambda: len(telegram.chat(42)) >= 3, within=60)
    await asyncio.sleep(1)  # nothing more comes
    later, answer, result = texts(telegram, 42)
    assert later.startswith("⏳ long_job on files is taking a while")
    assert answer == "done: still running"
    assert result == "✅ long_job on files finished:\njob done after 3s"
    assert await cluster.stop(process) == 0
