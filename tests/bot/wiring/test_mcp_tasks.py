"""MCP tasks: a long tool call runs as a task on a server that offers them (2025-11-25's
experimental tasks; 2026-07-28's tasks extension) — its status is the run's status line, its
result comes from `tasks/result` (2025-11-25) or inline in `tasks/get` (2026-07-28), a failed
task is the tool's error, and a run that stops cancels the task on the server
(`tasks/cancel`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.base import ConversationKey
from agent.mcp.config import Revision
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import parley
from tests.bot.recording import RecordingAdapter, message
from tests.fakes.mcp_process import stdio_server

pytestmark = pytest.mark.process

GROUP = ConversationKey(platform="telegram", chat_id="-100")
TASKS = {"MCP_TASKS": "1"}


def result_of(model: ScriptedModel, request: int) -> str:
    return str(model.requests[request].messages[-1].content[0].content)


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_task_shows_its_status_and_its_result_is_the_tools(
    redis: aioredis.Redis, tmp_path: Path, protocol: Revision
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__long_job", seconds=0.5)), reply("Job done.")])
    adapter = RecordingAdapter()
    adapter.progress_delay = 0  # type: ignore[attr-defined]  # shown at once
    server = stdio_server(ledger, env=TASKS, protocol=protocol)
    async with parley(redis, model, server=server, adapter=adapter) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
    assert ledger_lines(ledger) == ["task long_job"]  # called as a task, once
    assert "job done after 0.5s" in result_of(model, 1)  # tasks/result, or tasks/get inline
    shown = [s for chat, s in adapter.progress_log if chat == GROUP.id and s]
    assert "test: started" in shown and "test: done" in shown
    assert adapter.texts(GROUP)[-1] == "Job done."


async def test_without_task_support_the_same_tool_is_an_ordinary_call(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__long_job", seconds=0.1)), reply("Done.")])
    async with parley(
        redis, model, server=stdio_server(ledger), adapter=RecordingAdapter()
    ) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
    assert ledger_lines(ledger) == []  # no task was made
    assert "job done after 0.1s" in result_of(model, 1)


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_failed_task_is_the_tools_error(
    redis: aioredis.Redis, tmp_path: Path, protocol: Revision
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel(
        [turn(call("test__long_job", seconds=0.1, fail=True)), reply("It broke.")]
    )
    server = stdio_server(ledger, env=TASKS, protocol=protocol)
    async with parley(redis, model, server=server, adapter=RecordingAdapter()) as h:
        await h.submit(message(GROUP, "run the job", direct=False))
        await h.settle(within=60)
    assert ledger_lines(ledger) == ["task long_job"]
    seen = result_of(model, 1)
    # 2025-11-25: the server's statusMessage; 2026-07-28: the tool's own error result inline
    assert "Error executing tool long_job" in seen
    assert h.adapter.texts(GROUP)[-1] == "It broke."


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_call_that_times_out_cancels_its_task_on_the_server(
    redis: aioredis.Redis, tmp_path: Path, protocol: Revision
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__long_job", seconds=60)), reply("Too slow.")])
    server = stdio_server(ledger, env=TASKS, timeout=1, protocol=protocol)
    async with parley(redis, model, server=server, adapter=RecordingAdapter()) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
    lines = ledger_lines(ledger)  # a read-only call is tried again: each try cancels its task
    assert lines and lines == ["task long_job", "cancelled long_job"] * (len(lines) // 2)
    assert harness.adapter.texts(GROUP)[-1] == "Too slow."
