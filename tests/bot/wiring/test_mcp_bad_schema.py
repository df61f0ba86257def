"""An MCP server lists one tool whose inputSchema is not valid JSON Schema: that tool is left
out with one log line (a provider would refuse every request offering it), the server's other
tools work in the running bot, and `parley doctor` and `parley mcp list` say which tool and
why. The server is the real test MCP server, built with the `mcp` SDK."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from agent.messages import ChatRequest, ChatResponse
from bot.cli import main
from bot.config import Settings
from bot.wiring.mcp_setup import check_mcp
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running
from tests.bot.recording import dm, message
from tests.bot.wiring.test_mcp import config_file, toolbox
from tests.fakes.mcp_process import stdio_server

pytestmark = pytest.mark.process

MANGLED = stdio_server(env={"MCP_BAD_SCHEMA": "1"})


async def test_a_tool_with_an_invalid_schema_is_left_out_and_the_rest_work(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.mcp")
    model = ScriptedModel([turn(call("files__lookup", key="invoice-7")), reply("Found it.")])
    chat = dm()
    async with toolbox(files=MANGLED) as box, running(redis, model, tool_source=box) as harness:
        server = box.status()["files"]
        assert server.state == "ready"
        assert list(server.skipped) == ["mangled"]
        assert "files__lookup" in [t.name for t in server.tools]
        await harness.submit(message(chat, "look up invoice 7"))
        await harness.settle(within=60)
    assert harness.adapter.texts(chat) == ["Found it."]
    offered = [spec.name for spec in model.requests[0].tools]
    assert "files__lookup" in offered and "files__mangled" not in offered
    assert "value of invoice-7" in model.requests[1].messages[-1].content[0].content  # type: ignore[union-attr]
    said = [r.getMessage() for r in caplog.records if "mangled" in r.getMessage()]
    assert said == [
        "MCP server files: tool mangled left out, its input schema is not valid JSON Schema "
        "(properties/when/type: 'moment' is not valid under any of the given schemas)"
    ]


async def test_doctor_names_the_tool_left_out(tmp_path: Path) -> None:
    path = config_file(tmp_path, {"files": MANGLED})
    check = await check_mcp(Settings.load(env_file=None, mcp={"PARLEY_MCP_CONFIG": str(path)}))
    assert check.status == "warn" and "invalid input schema" in check.hint
    assert "1/1 servers ready; tools left out (invalid input schema): files__mangled" in (
        check.detail
    )


def test_mcp_list_names_the_tool_left_out_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_MCP_CONFIG", str(config_file(tmp_path, {"files": MANGLED})))
    monkeypatch.setenv("PARLEY_MCP_START_TIMEOUT", "30")
    main(["--env-file", "/dev/null", "mcp", "list"])
    out = capsys.readouterr().out
    assert "files__lookup" in out
    assert "mangled" in out and "left out: invalid input schema at properties/when/type" in out


BACKTRACKING = stdio_server(env={"MCP_BAD_SCHEMA": "pattern"})
DANGLING = stdio_server(env={"MCP_BAD_SCHEMA": "ref"})


async def test_a_backtracking_pattern_does_not_freeze_other_conversations(
    redis: aioredis.Redis,
) -> None:
    # ^(a+)+$ against 28 a's and a '!': most of a minute of backtracking in Python's re
    evil = "a" * 28 + "!"

    def answer(request: ChatRequest) -> ChatResponse:
        said = request.messages[-1].text
        if said.endswith("hello"):
            return reply("Hello, Bob.")
        if said.endswith("check the date"):
            return turn(call("files__mangled", when=evil))
        return reply("Could not.")

    model = ScriptedModel([answer] * 3)
    ana, bob = dm("41"), dm("43")
    async with toolbox(files=BACKTRACKING) as box, running(redis, model, tool_source=box) as h:
        started = time.monotonic()
        await h.submit(message(ana, "check the date", user="41"))
        await h.submit(message(bob, "hello", user="43"))
        await h.settle(within=60)
        took = time.monotonic() - started
    assert h.adapter.texts(ana) == ["Could not."] and h.adapter.texts(bob) == ["Hello, Bob."]
    [after] = [r for r in model.requests if r.messages[-1].text == ""]  # the tool's result
    observation = str(after.messages[-1].content[0].content)  # type: ignore[union-attr]
    assert "Invalid arguments for files__mangled" in observation and evil not in observation
    assert took < 10


async def test_a_dangling_ref_is_an_error_for_that_tool_not_a_failed_run(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel(
        [turn(call("files__mangled", when="monday")), reply("That tool is broken.")]
    )
    chat = dm()
    async with toolbox(files=DANGLING) as box, running(redis, model, tool_source=box) as h:
        await h.submit(message(chat, "check monday"))
        await h.settle(within=60)
    assert h.adapter.texts(chat) == ["That tool is broken."]
    observation = str(model.requests[1].messages[-1].content[0].content)  # type: ignore[union-attr]
    assert "input schema cannot be used" in observation
