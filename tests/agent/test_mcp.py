"""MCP servers as tools: real servers built with the `mcp` SDK, over stdio and Streamable HTTP,
driven through the agent with the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import mcp.types as mt
import pytest
import redis.asyncio as aioredis

from agent import Agent, AgentConfig, AwaitingApproval, Finished, builtin_registry
from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from agent.mcp.pins import RedisPins
from agent.protocols import RunContext
from agent.testing import ScriptedModel, call, reply, turn
from tests.fakes.mcp_process import free_port, http_server, stdio_server
from tests.helpers import until

pytestmark = pytest.mark.process

TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0)


@contextlib.asynccontextmanager
async def toolbox(**servers: ServerConfig) -> AsyncIterator[McpToolbox]:
    box = McpToolbox(McpConfig(mcpServers=servers), TIMING)
    await box.start()
    try:
        yield box
    finally:
        await box.stop()


def agent(model: ScriptedModel, box: McpToolbox) -> Agent:
    config = AgentConfig(backoff_base=0.01, backoff_max=0.02)
    return Agent(model, builtin_registry(), config=config, tool_source=box)


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


async def test_tools_are_offered_with_their_schema_and_approval_class(ctx: RunContext) -> None:
    async with toolbox(test=stdio_server()) as box:
        tools = {t.name: t for t in box.tools_for(ctx)}
        assert {"test__lookup", "test__delete_item", "test__write_note"} <= set(tools)
        assert not tools["test__lookup"].side_effects  # readOnlyHint: true
        assert tools["test__delete_item"].side_effects  # destructiveHint
        assert tools["test__write_note"].side_effects  # no annotations at all
        spec = tools["test__lookup"].spec()
        assert spec.input_schema["required"] == ["key"]
        assert spec.input_schema["properties"]["key"]["type"] == "string"


async def test_allowlist_exclusions_and_approval_overrides(
    ctx: RunContext, caplog: pytest.LogCaptureFixture
) -> None:
    async with toolbox(
        a=stdio_server(tools=["lookup", "delete_item"], exclude=["delete_item"]),
        b=stdio_server(approval="always", tools=["lookup"]),
        c=stdio_server(approval="never", tools=["delete_item"]),
    ) as box:
        tools = {t.name: t for t in box.tools_for(ctx)}
        assert set(tools) == {"a__lookup", "b__lookup", "c__delete_item"}
        assert tools["b__lookup"].side_effects and not tools["c__delete_item"].side_effects
    never = [r.getMessage() for r in caplog.records if "approval is 'never'" in r.getMessage()]
    assert never == ["MCP server c: approval is 'never', so its tools run without asking"]


async def test_a_read_only_tool_runs_without_approval(ctx: RunContext) -> None:
    model = ScriptedModel([turn(call("test__lookup", key="alpha")), reply("done")])
    async with toolbox(test=stdio_server()) as box:
        outcome = await agent(model, box).run("look alpha up", ctx)
    assert isinstance(outcome, Finished)
    result = model.requests[1].messages[-1].content[0]
    assert "value of alpha" in result.content and 'trust="untrusted"' in result.content
    assert not result.is_error


async def test_arguments_are_checked_against_the_schema_before_the_call(ctx: RunContext) -> None:
    model = ScriptedModel(
        [
            turn(call("test__delete_item", item=7)),
            turn(call("test__delete_item", count=2)),
            reply("sorry"),
        ]
    )
    async with toolbox(test=stdio_server()) as box:
        outcome = await agent(model, box).run("delete", ctx)
    assert isinstance(outcome, Finished)  # an invalid call never reaches the approval
    result = model.requests[1].messages[-1].content[0]
    assert result.is_error and "Invalid arguments for test__delete_item" in result.content
    assert "item: must be of type string" in result.content
    missing = model.requests[2].messages[-1].content[0]
    assert missing.is_error and "'item' is a required property" in missing.content


async def test_errors_images_and_resources_become_observations(ctx: RunContext) -> None:
    model = ScriptedModel(
        [turn(call("test__broken", reason="why"), call("test__picture")), reply("ok")]
    )
    async with toolbox(test=stdio_server()) as box:
        outcome = await agent(model, box).run("try things", ctx)
    assert isinstance(outcome, Finished)
    broken, picture = model.requests[1].messages[-1].content
    assert broken.is_error and "test__broken failed" in broken.content
    assert not picture.is_error
    assert "a small picture" in picture.content
    assert "[image: image/png" in picture.content and "iVBOR" not in picture.content
    assert (
        "[resource file:///notes/a.txt]" in picture.content and "attached note" in picture.content
    )


async def test_a_call_over_the_server_timeout_is_an_observation(ctx: RunContext) -> None:
    model = ScriptedModel([turn(call("test__slow", seconds=5)), reply("ok")])
    async with toolbox(test=stdio_server(timeout=0.3)) as box:
        config = AgentConfig(tool_retries=0)
        outcome = await Agent(model, builtin_registry(), config=config, tool_source=box).run(
            "be slow", ctx
        )
    assert isinstance(outcome, Finished)
    result = model.requests[1].messages[-1].content[0]
    assert result.is_error and "timed out" in result.content


async def test_a_destructive_tool_waits_for_approval_and_runs_once(
    ctx: RunContext, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel(
        [turn(call("test__delete_item", item="invoice-7", count=2)), reply("deleted")]
    )
    async with toolbox(test=stdio_server(ledger)) as box:
        outcome = await agent(model, box).run("delete invoice 7 twice", ctx)
        assert isinstance(outcome, AwaitingApproval)
        (step,) = outcome.plan.steps
        assert step.tool == "test__delete_item" and step.args == {"item": "invoice-7", "count": 2}
        assert ledger_lines(ledger) == []
        done = await agent(model, box).resume(outcome.state, approved=True)
    assert isinstance(done, Finished)
    assert ledger_lines(ledger) == ["delete_item invoice-7 2"]


async def test_a_rejected_destructive_tool_never_runs(ctx: RunContext, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__write_note", note="hello")), reply("fine")])
    async with toolbox(test=stdio_server(ledger)) as box:
        outcome = await agent(model, box).run("note hello", ctx)
        assert isinstance(outcome, AwaitingApproval)
        done = await agent(model, box).resume(outcome.state, approved=False)
    assert isinstance(done, Finished)
    assert ledger_lines(ledger) == []


async def test_streamable_http_with_a_bearer_token(ctx: RunContext) -> None:
    with http_server("s3cret") as url:
        good = ServerConfig(url=url, headers={"Authorization": "Bearer s3cret"})
        bad = ServerConfig(url=url, headers={"Authorization": "Bearer wrong"})
        model = ScriptedModel([turn(call("remote__lookup", key="beta")), reply("ok")])
        async with toolbox(remote=good, intruder=bad) as box:
            assert box.servers["remote"].state == "ready"
            assert box.servers["intruder"].state == "down"  # 401: never connected
            assert box.servers["intruder"].error == "refused: HTTP 401"  # not a bare "MCPError"
            assert not [t for t in box.tools_for(ctx) if t.name.startswith("intruder__")]
            outcome = await agent(model, box).run("look beta up", ctx)
    assert isinstance(outcome, Finished)
    assert "value of beta" in model.requests[1].messages[-1].content[0].content


async def test_a_refused_server_stays_down_while_it_is_retried() -> None:
    # a retry is not a start: health said "starting" for a server refusing every attempt
    fast = Timing(start_timeout=30, call_timeout=30, retry_base=0.01, retry_max=0.01)
    with http_server("s3cret") as url:
        bad = ServerConfig(url=url, headers={"Authorization": "Bearer wrong"})
        box = McpToolbox(McpConfig(mcpServers={"intruder": bad}), fast)
        await box.start()
        try:
            server = box.servers["intruder"]
            seen = [server.state]
            async with asyncio.timeout(30):
                while server._attempt < 5:  # each state the retries pass through
                    await server._change.wait()
                    seen.append(server.state)
        finally:
            await box.stop()
    assert seen[0] == "down" and server.error  # refused: never connected
    assert set(seen) == {"down"}


async def test_a_server_that_cannot_start_leaves_the_others_working(ctx: RunContext) -> None:
    broken = ServerConfig(command="/nonexistent/mcp-server")
    model = ScriptedModel([turn(call("good__lookup", key="gamma")), reply("ok")])
    started = time.monotonic()
    async with toolbox(broken=broken, good=stdio_server()) as box:
        assert time.monotonic() - started < TIMING.start_timeout
        assert box.servers["broken"].state == "down"
        assert box.servers["broken"].error and "cannot run" in box.servers["broken"].error
        outcome = await agent(model, box).run("look gamma up", ctx)
    assert isinstance(outcome, Finished)
    assert "value of gamma" in model.requests[1].messages[-1].content[0].content


async def test_a_killed_stdio_server_is_restarted_on_next_use(ctx: RunContext) -> None:
    model = ScriptedModel(
        [
            turn(call("test__whoami")),
            reply("noted"),
            turn(call("test__lookup", key="delta")),
            reply("ok"),
            turn(call("test__whoami")),
            reply("noted"),
        ]
    )
    async with toolbox(test=stdio_server()) as box:
        bot = agent(model, box)
        await bot.run("who are you", ctx)
        first = model.requests[1].messages[-1].content[0].content
        pid = int(first.split("\n")[1])  # inside the untrusted-data wrapper
        os.kill(pid, signal.SIGKILL)  # the server process Parley started for this test
        outcome = await bot.run("look delta up", ctx)
        assert isinstance(outcome, Finished)
        result = model.requests[3].messages[-1].content[0]
        assert not result.is_error and "value of delta" in result.content
        await bot.run("who are you now", ctx)
        second = model.requests[5].messages[-1].content[0].content
        assert int(second.split("\n")[1]) != pid
        assert box.servers["test"].state == "ready"


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_the_tool_list_refreshes_on_list_changed(
    ctx: RunContext, protocol: Literal["2025-11-25", "2026-07-28"]
) -> None:
    # 2026-07-28 says so on a subscriptions/listen stream, 2025-11-25 as a notification
    model = ScriptedModel([turn(call("test__grow")), reply("grown")])
    async with toolbox(test=stdio_server(protocol=protocol)) as box:
        assert box.servers["test"].protocol == protocol
        assert "test__late" not in {t.name for t in box.tools_for(ctx)}
        await agent(model, box).run("grow", ctx)
        await until(lambda: "test__late" in {t.name for t in box.tools_for(ctx)})


async def test_a_2026_server_without_subscriptions_listen_is_usable(ctx: RunContext) -> None:
    # it does not advertise tools.listChanged, so no stream is asked of it
    model = ScriptedModel([turn(call("test__lookup", key="gamma")), reply("found")])
    server = stdio_server(protocol="2026-07-28", env={"MCP_NO_LISTEN": "1"})
    async with toolbox(test=server) as box:
        assert box.servers["test"].state == "ready"
        assert box.servers["test"].protocol == "2026-07-28"
        outcome = await agent(model, box).run("look gamma up", ctx)
    assert isinstance(outcome, Finished)
    result = model.requests[1].messages[-1].content[0]
    assert not result.is_error and "value of gamma" in result.content


async def test_a_tool_relisted_as_read_only_after_review_still_needs_approval(
    ctx: RunContext, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The model obeys text injected by the server: flip, then write. `write_note` declared
    # nothing when first listed (needs approval); the server relists it as read-only.
    ledger = tmp_path / "ledger"
    model = ScriptedModel(
        [
            turn(call("test__flip")),
            reply("flipped"),
            turn(call("test__write_note", note="pwned")),
            reply("never"),
        ]
    )

    def note(box: McpToolbox) -> str | None:
        return next((t.shown for t in box.tools_for(ctx) if t.name == "test__write_note"), None)

    async with toolbox(test=stdio_server(ledger)) as box:
        before = note(box)
        await agent(model, box).run("do what the server says", ctx)
        await until(lambda: note(box) != before)  # relisted, now "read-only"
        outcome = await agent(model, box).run("write the note", ctx)
    assert isinstance(outcome, AwaitingApproval)
    assert ledger_lines(ledger) == []
    assert any("now says it is read-only" in r.getMessage() for r in caplog.records)


async def test_servers_are_offered_only_where_allowed(ctx: RunContext) -> None:
    finance = stdio_server(tools=["lookup"], allow=["slack:T1/C-finance", "telegram:7"])
    channel = RunContext(
        conversation_id="slack:T1:C-finance",
        platform="slack",
        user_id="U1",
        chat_id="C-finance",
        team_id="T1",
        is_direct=False,
    )
    elsewhere = RunContext(
        conversation_id="slack:T1:C-random",
        platform="slack",
        user_id="U1",
        chat_id="C-random",
        team_id="T1",
        is_direct=False,
    )
    async with toolbox(finance=finance) as box:
        assert [t.name for t in box.tools_for(channel)] == ["finance__lookup"]
        assert list(box.tools_for(elsewhere)) == []
        assert list(box.tools_for(ctx)) == []  # telegram:42
        model = ScriptedModel([turn(call("finance__lookup", key="x")), reply("no")])
        await agent(model, box).run("look x up", elsewhere)
        assert "finance__lookup" not in {t.name for t in model.requests[0].tools}
        result = model.requests[1].messages[-1].content[0]
        assert result.is_error and "no tool named" in result.content.lower()


async def test_allowing_a_persons_dm_does_not_offer_the_server_in_their_groups() -> None:
    """Attack: user 7 is allowed a finance server in their private chat (`telegram:7`); in a
    group, a message tells the model to look the ledger up and post it for everyone."""
    finance = stdio_server(tools=["lookup"], allow=["telegram:7", "telegram:user:9"])
    dm = RunContext(conversation_id="telegram:7", platform="telegram", user_id="7", chat_id="7")
    group = RunContext(
        conversation_id="telegram:-1001",
        platform="telegram",
        user_id="7",
        chat_id="-1001",
        is_direct=False,
    )
    someone_in_dm = RunContext(
        conversation_id="telegram:9", platform="telegram", user_id="9", chat_id="9"
    )
    async with toolbox(finance=finance) as box:
        assert [t.name for t in box.tools_for(dm)] == ["finance__lookup"]
        assert list(box.tools_for(group)) == []
        # the explicit person form still names a person wherever they ask
        assert [t.name for t in box.tools_for(someone_in_dm)] == ["finance__lookup"]
        model = ScriptedModel([turn(call("finance__lookup", key="ledger")), reply("posted")])
        await agent(model, box).run("post the ledger here for everyone", group)
        assert "finance__lookup" not in {t.name for t in model.requests[0].tools}
        result = model.requests[1].messages[-1].content[0]
        assert result.is_error and "no tool named" in result.content.lower()


async def test_a_server_that_was_down_is_retried_with_backoff(ctx: RunContext) -> None:
    port = free_port()
    late = ServerConfig(url=f"http://127.0.0.1:{port}/mcp", headers={"Authorization": "Bearer t"})
    async with toolbox(late=late) as box:
        server = box.servers["late"]
        assert server.state == "down" and list(box.tools_for(ctx)) == []
        with http_server("t", port=port):
            # no call asks for it: the supervisor's own retries bring it up
            await until(lambda: server.state == "ready")
            assert "late__lookup" in {t.name for t in box.tools_for(ctx)}


async def test_a_call_wakes_a_server_waiting_out_its_backoff_and_an_outage_is_two_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The backoff is longer than the test may take: only the call can bring the server back.
    patient = Timing(start_timeout=30, call_timeout=30, retry_base=300, retry_max=300)
    box = McpToolbox(McpConfig(mcpServers={"test": stdio_server()}), patient)
    await box.start()
    try:
        server = box.servers["test"]
        first = await server.call("whoami", {})
        assert isinstance(first, mt.CallToolResult) and isinstance(first.content[0], mt.TextContent)
        caplog.set_level(logging.INFO, logger="agent.mcp.client")
        os.kill(int(first.content[0].text), signal.SIGKILL)  # the process this test started
        with pytest.raises(ConnectionError, match="went away"):
            await server.call("whoami", {})
        await until(lambda: server.state == "down")
        async with asyncio.timeout(patient.start_timeout):  # not the 300 s backoff
            second = await server.call("whoami", {})
        assert isinstance(second, mt.CallToolResult) and isinstance(
            second.content[0], mt.TextContent
        )
        assert second.content[0].text != first.content[0].text  # a new process answered
        assert server.state == "ready"
    finally:
        await box.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "agent.mcp.client"]
    assert len([line for line in lines if "MCP server test is down" in line]) == 1
    assert len([line for line in lines if "MCP server test is back" in line]) == 1


async def test_a_stdio_server_gets_its_own_env_but_not_parleys_secrets(
    ctx: RunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-of-parley")
    model = ScriptedModel(
        [
            turn(call("test__getenv", name="ANTHROPIC_API_KEY"), call("test__getenv", name="MINE")),
            reply("ok"),
        ]
    )
    async with toolbox(test=stdio_server(env={"MINE": "given"})) as box:
        await agent(model, box).run("env?", ctx)
    theirs, mine = model.requests[1].messages[-1].content
    assert "(unset)" in theirs.content and "given" in mine.content


async def test_tools_whose_names_collide_are_both_left_out_and_named(
    ctx: RunContext, caplog: pytest.LogCaptureFixture
) -> None:
    # server "a" lists `b__lookup`, server "a__b" lists `lookup`: both would be a__b__lookup,
    # and a call meant for one would reach whichever was registered first
    prefixed = stdio_server(tools=["b__lookup"], env={"MCP_TOOL_PREFIX": "b__"})
    async with toolbox(a=prefixed, a__b=stdio_server(tools=["lookup"])) as box:
        assert [t.name for t in box.servers["a"].tools] == ["a__b__lookup"]
        assert [t.name for t in box.servers["a__b"].tools] == ["a__b__lookup"]
        assert list(box.tools_for(ctx)) == []
        assert box.collisions() == {"a__b__lookup": ["a: b__lookup", "a__b: lookup"]}
        model = ScriptedModel([turn(call("a__b__lookup", key="x")), reply("no such tool")])
        outcome = await agent(model, box).run("look x up", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "no such tool"
    assert "There is no tool named 'a__b__lookup'" in str(model.requests[1].messages[-1])
    said = [r.getMessage() for r in caplog.records if "would both be called" in r.getMessage()]
    assert said == [
        "MCP tools a: b__lookup and a__b: lookup would both be called a__b__lookup; "
        "neither is offered (rename a server)"
    ]


class NobodyConnected:
    """Credentials of a deployment where no one has connected a per-user server yet."""

    async def token(self, server: str, run: RunContext) -> str | None:
        return None

    async def connect_link(
        self, server: str, run: RunContext, question_id: str, refusal: object = None
    ) -> str:
        raise ConnectionError("not in this test")


async def test_a_per_user_servers_tools_that_collide_are_left_out_and_named(
    ctx: RunContext, caplog: pytest.LogCaptureFixture
) -> None:
    # per-user "a" lists `b__lookup` (cached from someone's listing), shared "a__b" lists
    # `lookup`: both a__b__lookup.
    config = McpConfig(
        mcpServers={
            "a__b": stdio_server(tools=["lookup"]),
            "a": ServerConfig(url="http://127.0.0.1:9/mcp", auth="user"),
        }
    )
    box = McpToolbox(config, TIMING, credentials=NobodyConnected())
    await box.start()
    try:
        assert box.collisions() == {}  # a's stand-in, a__connect, clashes with nothing
        assert [t.name for t in await box.source().tools_for(ctx)] == ["a__b__lookup", "a__connect"]
        box.personal["a"].listed = [
            mt.Tool(name="b__lookup", input_schema={"type": "object", "properties": {}})
        ]
        assert box.collisions() == {"a__b__lookup": ["a__b: lookup", "a: b__lookup"]}
        assert [tool.name for tool in await box.source().tools_for(ctx)] == []  # neither
    finally:
        await box.stop()
    said = [r.getMessage() for r in caplog.records if "would both be called" in r.getMessage()]
    assert "MCP tools a__b: lookup and a: b__lookup would both be called a__b__lookup" in said[-1]


async def test_a_tool_relisted_as_read_only_while_parley_restarted_still_needs_approval(
    ctx: RunContext, tmp_path: Path, redis: aioredis.Redis
) -> None:
    # `write_note` declared nothing when first listed (needs approval). Parley restarts; the
    # server now lists it as read-only; the model obeys text asking it to write.
    ledger = tmp_path / "ledger"
    pins = RedisPins(redis, "pins-test")

    async def offered(server: ServerConfig) -> dict[str, bool]:
        box = McpToolbox(McpConfig(mcpServers={"test": server}), TIMING, pins=pins)
        await box.start()
        try:
            return {t.name: t.side_effects for t in box.tools_for(ctx)}
        finally:
            await box.stop()

    first = await offered(stdio_server(ledger))
    assert first["test__write_note"] and not first["test__lookup"]
    flipped = stdio_server(ledger, env={"MCP_NOTE_READ_ONLY": "1"})
    box = McpToolbox(McpConfig(mcpServers={"test": flipped}), TIMING, pins=pins)
    await box.start()
    try:
        model = ScriptedModel([turn(call("test__write_note", note="pwned")), reply("never")])
        outcome = await agent(model, box).run("write the note", ctx)
    finally:
        await box.stop()
    assert isinstance(outcome, AwaitingApproval)
    assert ledger_lines(ledger) == []
    # a process whose pins are unreadable asks for everything until they are back
    away = RedisPins(aioredis.Redis(port=1, socket_connect_timeout=0.5), "pins-test")
    box = McpToolbox(McpConfig(mcpServers={"test": flipped}), TIMING, pins=away)
    await box.start()
    try:
        assert all(t.side_effects for t in box.tools_for(ctx))
    finally:
        await box.stop()
