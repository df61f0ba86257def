"""2026-07-28 tools run as tasks (the tasks extension), against a real `mcp` SDK server: a
task that needs input (`input_required`) is not cancelled: its question goes to the person as
any server question does, and their answer reaches the task in `tasks/update`; a per-user
(`"auth": "user"`) server is opted into the extension on each call's own session, as a shared
one is."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.deps import ToolContext
from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from agent.mcp.user import UserServer
from agent.tools import InputRequired, Tool
from tests.agent.mcp_people import PERSON, TOKEN, OneToken
from tests.fakes.mcp_process import http_server, stdio_server

pytestmark = pytest.mark.process

TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0)


async def test_a_per_user_servers_task_is_followed_to_its_result(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    shown: list[str] = []

    async def status(line: str) -> None:
        shown.append(line)

    with http_server(TOKEN, ledger, env={"MCP_TASKS": "1"}) as url:
        config = ServerConfig(url=url, auth="user", protocol="2026-07-28")
        server = UserServer("jobs", config, OneToken(), TIMING)
        tools = await server.tools_for(PERSON)
        job = next(tool for tool in tools if tool.name == "jobs__long_job")
        said = await job({"seconds": 0.3, "say": "done"}, ToolContext(run=PERSON, progress=status))
    assert "done" in said
    assert ledger.read_text().splitlines()[0] == "task long_job"  # it ran as a task


async def ask_and_answer(tool: Tool, args: dict[str, object], reply: str) -> object:
    """The call; its task's question, as the person sees it; the call again with `reply`."""
    with pytest.raises(InputRequired) as asked:
        await tool(args, ToolContext(run=PERSON))
    question = asked.value
    assert question.question.startswith("*jobs* (a connected tool, not Parley) asks:")
    assert "Run the job on" in question.question
    assert question.options[:2] == ["Yes", "No"]
    resume = {**question.resume, "answer": reply}
    return await tool(args, ToolContext(run=PERSON, resume=resume))


@pytest.mark.parametrize(
    ("reply", "said", "ran"), [("Yes", "ran the job on disk", True), ("No", "kept disk", False)]
)
async def test_a_tasks_question_is_asked_and_answered_through_tasks_update(
    tmp_path: Path, reply: str, said: str, ran: bool
) -> None:
    ledger = tmp_path / "ledger"
    config = stdio_server(ledger, protocol="2026-07-28", env={"MCP_TASKS": "1"})
    box = McpToolbox(McpConfig(mcpServers={"jobs": config}), TIMING)
    await box.start()
    try:
        tool = next(t for t in box.tools_for(PERSON) if t.name == "jobs__confirm_job")
        assert await ask_and_answer(tool, {"item": "disk"}, reply) == said
    finally:
        await box.stop()
    lines = ledger.read_text().splitlines()
    sure = "true" if ran else "false"
    assert lines[:2] == [
        "task confirm_job",
        f'update confirm_job: {{"go": {{"action": "accept", "content": {{"sure": {sure}}}}}}}',
    ]
    assert lines[2:] == (["confirm_job disk"] if ran else [])  # the task ran once, if at all


async def test_a_per_user_servers_task_question_is_answered_too(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    with http_server(TOKEN, ledger, env={"MCP_TASKS": "1"}) as url:
        config = ServerConfig(url=url, auth="user", protocol="2026-07-28")
        server = UserServer("jobs", config, OneToken(), TIMING)
        tool = next(t for t in await server.tools_for(PERSON) if t.name == "jobs__confirm_job")
        assert await ask_and_answer(tool, {"item": "disk"}, "Yes") == "ran the job on disk"
    assert ledger.read_text().splitlines()[-1] == "confirm_job disk"
