"""An MCP server that goes away in the middle of the newer exchanges, a 2026-07-28 task whose
question waits for the person (stdio) and a question whose requestState (SEP-2322) the answer
carries back and whose session mirrors header parameters (SEP-2243) once back (Streamable
HTTP), against a real `mcp` SDK server the test kills and the
supervisor brings back: the answer ends in one clear failure the model reads, nothing runs
twice, the supervisor says once that the server went down and once that it is back, and the
next call works."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import pytest

from agent.deps import ToolContext
from agent.execution import ExecutionPolicy, execute
from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from agent.messages import ToolUseBlock
from agent.tools import InputRequired, ToolRegistry
from tests.agent.mcp_people import PERSON, TOKEN
from tests.fakes.mcp_process import free_port, http_server, stdio_server

pytestmark = pytest.mark.process

# The backoff is longer than the test may take: only a call brings the server back.
TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=300, retry_max=300)
POLICY = ExecutionPolicy(timeout=30, backoff_base=0.01, backoff_max=0.02)


def confirm(item: str) -> ToolUseBlock:
    return ToolUseBlock(id=f"call-{item}", name="jobs__confirm_job", input={"item": item})


async def asked(box: McpToolbox, item: str) -> InputRequired:
    """Call the tool as the agent does; its task asks the person first."""
    registry = ToolRegistry(box.tools_for(PERSON))
    with pytest.raises(InputRequired) as question:
        await execute(registry, confirm(item), ToolContext(run=PERSON), POLICY)
    assert "Run the job on" in question.value.question
    return question.value


async def answered(box: McpToolbox, item: str, question: InputRequired) -> tuple[bool, str]:
    """The person says yes: the call again with their answer, as the agent makes it."""
    context = ToolContext(run=PERSON, resume={**question.resume, "answer": "Yes"})
    registry = ToolRegistry(box.tools_for(PERSON))
    async with asyncio.timeout(TIMING.call_timeout - 5):  # whatever happened: no hang
        result, _ = await execute(registry, confirm(item), context, POLICY)
    return result.is_error, str(result.content)


async def test_a_server_killed_while_its_tasks_question_waits_fails_the_answer_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.mcp.client")
    ledger, pids = tmp_path / "ledger", tmp_path / "pids"
    env = {"MCP_TASKS": "1", "MCP_PIDFILE": str(pids)}
    config = stdio_server(ledger, protocol="2026-07-28", env=env)
    box = McpToolbox(McpConfig(mcpServers={"jobs": config}), TIMING)
    await box.start()
    try:
        question = await asked(box, "disk")
        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)  # the process it started
        failed, said = await answered(box, "disk", question)  # the person said yes meanwhile
        assert failed and said.startswith("jobs__confirm_job could not connect after 1 attempts")
        # Straight away, while the supervisor may still be tearing the dead session down:
        # the next call wakes it from its (300 s) backoff and works.
        again = await asked(box, "tape")
        failed, said = await answered(box, "tape", again)
        assert not failed and "ran the job on tape" in said
    finally:
        await box.stop()
    assert len(pids.read_text().split()) == 2  # one restart
    lines = ledger.read_text().splitlines()
    assert "confirm_job disk" not in lines  # the lost task's job never ran, here or later
    assert lines.count("confirm_job tape") == 1
    assert [line.split(" ", 1)[0] for line in lines] == ["task", "task", "update", "confirm_job"]
    said_by_client = [r.getMessage() for r in caplog.records if r.name == "agent.mcp.client"]
    assert len([line for line in said_by_client if "jobs is down" in line]) == 1
    assert len([line for line in said_by_client if "jobs is back" in line]) == 1


async def test_a_http_server_killed_while_its_question_waits_takes_the_answer_once_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # SEP-2322: the server keeps nothing between the question and the answer; its
    # requestState (sealed with what outlives the process) comes back with the answer.
    caplog.set_level(logging.INFO, logger="agent.mcp.client")
    ledger, pids, port = tmp_path / "ledger", tmp_path / "pids", free_port()
    env = {"MCP_STATE_PREFIX": "st1:", "MCP_PIDFILE": str(pids)}
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    config = ServerConfig(url=url, headers=headers, protocol="2026-07-28")
    box = McpToolbox(McpConfig(mcpServers={"paint": config}), TIMING)
    call = ToolUseBlock(id="call-lamp", name="paint__pick_colour", input={"item": "lamp"})
    try:
        with http_server(TOKEN, ledger, port=port, env=env):
            await box.start()
            with pytest.raises(InputRequired) as asked:
                await execute(box_tools(box), call, ToolContext(run=PERSON), POLICY)
            os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)  # the process it started
        # killed while the person reads the question; they answer before it is back
        resume = {**asked.value.resume, "answer": "blue"}
        context = ToolContext(run=PERSON, resume=resume)
        async with asyncio.timeout(TIMING.call_timeout - 5):  # no hang
            result, trace = await execute(box_tools(box), call, context, POLICY)
        assert result.is_error and "could not connect after" in str(result.content)
        assert not ledger.exists() or "pick_colour" not in ledger.read_text()
        with http_server(TOKEN, ledger, port=port, env=env):
            async with asyncio.timeout(TIMING.call_timeout - 5):
                result, _ = await execute(box_tools(box), call, context, POLICY)
            assert not result.is_error and "lamp: colour=blue" in str(result.content)
            assert box.servers["paint"].state == "ready"
            # SEP-2243: the session the supervisor made again still mirrors header parameters
            where = ToolUseBlock(id="call-where", name="paint__locate", input={"region": "eu-1"})
            result, _ = await execute(box_tools(box), where, ToolContext(run=PERSON), POLICY)
            assert "located eu-1; header 'eu-1'" in str(result.content)
            await box.stop()  # before the server: its open stream would hold up its stopping
    finally:
        await box.stop()
    assert ledger.read_text().splitlines() == ["pick_colour lamp: colour=blue"]  # once
    said_by_client = [r.getMessage() for r in caplog.records if r.name == "agent.mcp.client"]
    assert len([line for line in said_by_client if "paint is down" in line]) == 1
    assert len([line for line in said_by_client if "paint is back" in line]) == 1


def box_tools(box: McpToolbox) -> ToolRegistry:
    return ToolRegistry(box.tools_for(PERSON))
