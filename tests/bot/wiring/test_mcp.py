"""MCP tools in the running bot: approvals through the chat, `parley mcp list`, doctor, /readyz."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from bot.cli import main
from bot.config import Settings
from bot.ops.http import HttpServer
from bot.wiring.mcp_setup import check_mcp, readiness
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running
from tests.bot.recording import click, dm, message
from tests.fakes.mcp_process import stdio_server

pytestmark = pytest.mark.process

TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0)
BROKEN = ServerConfig(command="/nonexistent/mcp-server")


@contextlib.asynccontextmanager
async def toolbox(**servers: ServerConfig) -> AsyncIterator[McpToolbox]:
    box = McpToolbox(McpConfig(mcpServers=servers), TIMING)
    await box.start()
    try:
        yield box
    finally:
        await box.stop()


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def config_file(tmp_path: Path, servers: dict[str, ServerConfig]) -> Path:
    path = tmp_path / "mcp.json"
    raw = {name: s.model_dump(exclude_defaults=True) for name, s in servers.items()}
    path.write_text(json.dumps({"mcpServers": raw}))
    return path


async def test_a_destructive_mcp_tool_runs_once_after_approve_and_only_for_the_requester(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel(
        [
            turn(call("files__lookup", key="invoice-7")),  # read-only: no approval
            turn(call("files__delete_item", item="invoice-7 <!channel>")),
            reply("Deleted."),
        ]
    )
    group = dm("-100")
    async with (
        toolbox(files=stdio_server(ledger)) as box,
        running(redis, model, tool_source=box) as harness,
    ):
        await harness.submit(message(group, "delete invoice 7", direct=False))
        await harness.settle(within=60)
        (approval,) = harness.adapter.in_conversation(group)
        text = approval.message.text
        assert "`files__delete_item`" in text and 'item: "invoice-7 <!channel>"' in text
        assert [b.label for b in approval.message.buttons] == ["Approve", "Reject"]
        lookup = model.requests[1].messages[-1].content[0]
        assert "value of invoice-7" in lookup.content  # ran before any approval

        await harness.submit(click(group, approval, "approve", user="mallory", name="Mal"))
        await harness.settle(within=60)
        assert ledger_lines(ledger) == []

        await harness.submit(click(group, approval, "approve"))
        await harness.submit(click(group, approval, "approve"))  # a double click
        await harness.settle(within=60)
        assert ledger_lines(ledger) == ["delete_item invoice-7 <!channel> 1"]
        assert harness.adapter.texts(group)[-1] == "Deleted."


async def test_a_rejected_mcp_tool_never_runs(redis: aioredis.Redis, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("files__write_note", note="hi")), reply("OK, I won't.")])
    chat = dm()
    async with (
        toolbox(files=stdio_server(ledger)) as box,
        running(redis, model, tool_source=box) as harness,
    ):
        await harness.submit(message(chat, "write a note"))
        await harness.settle(within=60)
        approval = harness.adapter.in_conversation(chat)[0]
        await harness.submit(click(chat, approval, "reject"))
        await harness.settle(within=60)
        await harness.submit(click(chat, approval, "approve"))  # too late
        await harness.settle(within=60)
    assert ledger_lines(ledger) == []
    assert "Rejected by Ana" in approval.current.text


def test_mcp_list_shows_state_and_approval_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, {"files": stdio_server(), "gone": BROKEN})
    monkeypatch.setenv("PARLEY_MCP_CONFIG", str(path))
    monkeypatch.setenv("PARLEY_MCP_START_TIMEOUT", "30")
    monkeypatch.setenv("PARLEY_DATA_DIR", str(tmp_path / "data"))
    code = main(["--env-file", "/dev/null", "mcp", "list"])
    out, err = capsys.readouterr()
    assert code == 1  # one server is down
    # the table alone: the log lines (servers starting, one failing) went to a file
    assert err == "" and all(
        line.startswith(("files", "gone", "    ")) for line in out.splitlines()
    )
    assert "MCP servers configured: files, gone" in (tmp_path / "data" / "mcp.log").read_text()
    assert "files  [stdio]" in out and "ready, MCP 2025-11-25" in out
    assert "gone  [stdio] /nonexistent/mcp-server  down (cannot run its command" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("    files__")}
    assert "read-only" in lines["files__lookup"]
    assert "needs approval" in lines["files__delete_item"]
    assert "needs approval" in lines["files__write_note"]


async def test_doctor_checks_the_config_file_and_the_servers(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"x": {"url": "ftp://nope"}}}')
    check = await check_mcp(Settings.load(env_file=None, mcp={"PARLEY_MCP_CONFIG": str(bad)}))
    assert check.status == "fail" and "bad.json" in check.detail

    good = config_file(tmp_path, {"files": stdio_server(), "gone": BROKEN})
    check = await check_mcp(Settings.load(env_file=None, mcp={"PARLEY_MCP_CONFIG": str(good)}))
    assert check.status == "warn" and "1/2 servers ready; gone down" in check.detail


async def test_readyz_details_mcp_servers_without_failing_for_one_down() -> None:
    async with toolbox(files=stdio_server(), gone=BROKEN) as box:
        http = HttpServer("127.0.0.1", 0)
        http.add_check("mcp", readiness(box))
        await http.start()
        try:
            async with (
                aiohttp.ClientSession() as client,
                client.get(f"http://127.0.0.1:{http.metrics_port}/readyz") as response,
            ):
                body = await response.json()
        finally:
            await http.stop()
    assert response.status == 200
    assert body["checks"]["mcp"]["ok"] is True
    assert body["checks"]["mcp"]["detail"].startswith("1/2 servers ready; gone down")


def test_a_worker_refuses_a_broken_mcp_config_with_a_clear_message(
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "mcp.json"
    bad.write_text('{"mcpServers": {"crm": {"url": "https://x/mcp", "headers": {"A": "${NOPE}"}}}}')
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("PARLEY_MCP_CONFIG", str(bad))
    monkeypatch.setenv("PARLEY_HTTP_PORT", "0")
    assert main(["--env-file", "/dev/null", "worker"]) == 1
    assert "mcpServers.crm.headers.A uses ${NOPE}, which is not set" in capsys.readouterr().err
