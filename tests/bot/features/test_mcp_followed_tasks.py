"""MCP tasks that outlive their call (issue 32): the call hands the task to the follower instead
of cancelling it, the thread is told the result will follow, and the follower (a worker's
loop, its records in Redis) posts the result there once — across a restart, with two
followers racing, through the server going away, and only to the requester when the run
answered them alone. A failed or expired task says so once; /cancel sends `tasks/cancel`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from adapters.base import ConversationKey
from agent import ApprovalRequired, builtin_registry
from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from agent.mcp.following import HANDED_OFF, FollowedTask, TaskFollower
from agent.protocols import RunContext
from agent.tools import ToolContext, ToolError, tool
from bot.config import Settings
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, parley
from tests.bot.recording import RecordingAdapter, click, message
from tests.fakes.mcp_process import stdio_server
from tests.private_redis import private_redis

pytestmark = pytest.mark.process

TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0)
GROUP = ConversationKey(platform="telegram", chat_id="-100")
LATER = "⏳ long_job on test is taking a while"
FINISHED = "✅ long_job on test finished"


def tasks_server(ledger: Path, **env: str) -> ServerConfig:
    """The test server speaking MCP tasks; a call may wait 1 s, so a longer job is followed."""
    return stdio_server(ledger, env={"MCP_TASKS": "1", **env}, timeout=1)


@contextlib.asynccontextmanager
async def toolbox(server: ServerConfig) -> AsyncIterator[McpToolbox]:
    box = McpToolbox(McpConfig(mcpServers={"test": server}), TIMING)
    await box.start()
    try:
        yield box
    finally:
        await box.stop()


@contextlib.asynccontextmanager
async def following(
    redis: aioredis.Redis, model: ScriptedModel, ledger: Path, adapter: RecordingAdapter, **env: str
) -> AsyncIterator[Harness]:
    """Parley with the tasks server, which follows what outlives a call."""
    server = tasks_server(ledger, **env)
    async with parley(redis, model, server=server, follow=True, adapter=adapter) as harness:
        yield harness


def job(**args: Any) -> ScriptedModel:
    """A model that runs long_job with `args`, then answers that its result will follow."""
    return ScriptedModel([turn(call("test__long_job", **args)), reply("It will follow.")])


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def said(adapter: RecordingAdapter, start: str) -> list[str]:
    return [text for text in adapter.texts(GROUP) if text.startswith(start)]


async def eventually(check: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "did not happen in time"
        await asyncio.sleep(0.05)


async def quiet(redis: aioredis.Redis, harness: Harness, within: float = 30.0) -> None:
    """Wait until no task is followed any more, then a little longer for a second post."""
    keys = harness.runtime.keys
    deadline = time.monotonic() + within
    while await redis.zcard(keys.tasks_due) or await redis.zcard(keys.tasks_claimed):
        assert time.monotonic() < deadline, "a task is still followed"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # ten polls more: nobody posts it again


async def test_a_task_slower_than_its_call_is_posted_in_the_thread_once_later(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = job(seconds=2.5)
    adapter = RecordingAdapter()
    async with following(redis, model, ledger, adapter) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        # the model is told the truth: the task goes on and its result will be posted
        assert HANDED_OFF in str(model.requests[1].messages[-1].content[0].content)
        assert said(adapter, FINISHED) == []
        await eventually(lambda: bool(said(adapter, FINISHED)))
        await quiet(redis, harness)
    texts = adapter.texts(GROUP)
    assert [t for t in texts if t.startswith((LATER, FINISHED)) or t == "It will follow."] == [
        texts[0],
        "It will follow.",
        texts[-1],
    ]
    assert texts[0].startswith(LATER) and "job done after 2.5s" in texts[-1]
    assert len(said(adapter, FINISHED)) == 1 and len(said(adapter, LATER)) == 1
    assert ledger_lines(ledger) == ["task long_job"]  # not cancelled, not called again


async def test_a_2026_task_slower_than_its_call_is_followed_to_its_inline_result(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    # the tasks extension: the follower polls tasks/get, whose last answer carries the result
    ledger = tmp_path / "ledger"
    model = job(seconds=2.5)
    adapter = RecordingAdapter()
    server = stdio_server(ledger, env={"MCP_TASKS": "1"}, timeout=1, protocol="2026-07-28")
    async with parley(redis, model, server=server, follow=True, adapter=adapter) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        assert HANDED_OFF in str(model.requests[1].messages[-1].content[0].content)
        await eventually(lambda: bool(said(adapter, FINISHED)))
        await quiet(redis, harness)
    assert len(said(adapter, FINISHED)) == 1 and "job done after 2.5s" in said(adapter, FINISHED)[0]
    assert ledger_lines(ledger) == ["task long_job"]


async def test_a_restart_while_following_keeps_following_and_posts_once(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger, kept = tmp_path / "ledger", tmp_path / "tasks"
    kept.mkdir()
    server = tasks_server(ledger, MCP_TASK_DIR=str(kept))
    adapter = RecordingAdapter()
    model = job(seconds=3)
    async with parley(redis, model, server=server, follow=True, adapter=adapter) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        assert said(adapter, LATER)
    # Parley (and with it the stdio server it ran) stopped mid-task; a new one takes over
    assert said(adapter, FINISHED) == []
    async with parley(
        redis, ScriptedModel([]), server=server, follow=True, adapter=adapter
    ) as again:
        await eventually(lambda: bool(said(adapter, FINISHED)))
        await quiet(redis, again)
    [finished] = said(adapter, FINISHED)
    assert "job done after 3s" in finished


async def test_two_followers_racing_post_once(redis: aioredis.Redis, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    model = job(seconds=2)  # one script for both: either worker may take the message
    async with (
        toolbox(tasks_server(ledger)) as box,  # one server: either may follow the task
        parley(redis, model, toolbox=box, follow=True, adapter=adapter) as one,
        parley(redis, model, toolbox=box, follow=True, adapter=adapter) as two,
    ):
        for harness in (one, two):  # every claim is stale at once: both poll every task
            assert harness.runtime.tasks is not None
            harness.runtime.tasks.claim_for = 0
        await one.submit(message(GROUP, "run the job", direct=False))
        await eventually(lambda: bool(said(adapter, FINISHED)))
        await quiet(redis, one)
    assert len(said(adapter, FINISHED)) == 1 and len(said(adapter, LATER)) == 1


async def test_the_server_going_away_and_coming_back_while_followed(
    redis: aioredis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger, kept, pids = tmp_path / "ledger", tmp_path / "tasks", tmp_path / "pids"
    kept.mkdir()
    server = tasks_server(ledger, MCP_TASK_DIR=str(kept), MCP_PIDFILE=str(pids))
    adapter = RecordingAdapter()
    model = job(seconds=2)
    caplog.set_level(logging.INFO, logger="bot.features.followed_tasks")
    async with parley(redis, model, server=server, follow=True, adapter=adapter) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        assert said(adapter, LATER) and said(adapter, FINISHED) == []
        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)  # the server we started
        await eventually(lambda: bool(said(adapter, FINISHED)), within=60)
        await quiet(redis, harness)
    assert len(said(adapter, FINISHED)) == 1
    assert len(pids.read_text().split()) == 2  # it was started again, and followed there
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.features.followed_tasks"]
    assert len([line for line in lines if "wait for it to come back" in line]) == 1
    assert len([line for line in lines if "is back" in line]) == 1


async def test_redis_going_away_while_followed_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    model = job(seconds=2)
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    async with private_redis(tmp_path / "redis") as server:
        redis = server.client()
        try:
            async with (
                parley(
                    redis, model, server=tasks_server(ledger), follow=True, adapter=adapter
                ) as harness,
            ):
                assert harness.runtime.tasks is not None
                harness.runtime.tasks.claim_for = 1  # a pass cut off mid-task is soon retried
                await harness.submit(message(GROUP, "run the job", direct=False))
                await harness.settle(within=60)
                assert said(adapter, LATER)
                await server.down()  # the job finishes on the server meanwhile
                heartbeat = harness.runtime.tasks.heartbeat
                await eventually(lambda: heartbeat.state == "degraded")
                await asyncio.sleep(2.5)
                assert said(adapter, FINISHED) == []
                await server.up()
                await eventually(lambda: bool(said(adapter, FINISHED)))
                await quiet(redis, harness)
                assert heartbeat.state == "ok"
        finally:
            await redis.aclose()
    assert len(said(adapter, FINISHED)) == 1
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mcp-tasks ")]
    assert len([line for line in lines if "degraded" in line]) == 1
    assert len([line for line in lines if "recovered" in line]) == 1


@pytest.mark.parametrize(
    ("args", "env", "sentence"),
    [
        ({"seconds": 1.5, "fail": True}, {}, "❌ long_job on test failed: "),
        ({"seconds": 5}, {"MCP_TASK_TTL_MS": "1500"}, "⌛ long_job on test expired"),
    ],
    ids=["failed", "expired"],
)
async def test_a_task_that_ends_without_a_result_says_so_once(
    redis: aioredis.Redis,
    tmp_path: Path,
    args: dict[str, Any],
    env: dict[str, str],
    sentence: str,
) -> None:
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    model = job(**args)
    async with following(redis, model, ledger, adapter, **env) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await eventually(lambda: bool(said(adapter, sentence)))
        await quiet(redis, harness)
    assert len(said(adapter, sentence)) == 1 and said(adapter, FINISHED) == []


async def test_cancel_stops_a_followed_task_on_the_server(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    model = job(seconds=30)
    async with following(redis, model, ledger, adapter) as harness:
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        # someone else's /cancel does not stop it
        await harness.submit(
            message(GROUP, "/cancel", user="7", name="Bob", direct=False, command="cancel")
        )
        await harness.settle()
        assert ledger_lines(ledger) == ["task long_job"]
        await harness.submit(message(GROUP, "/cancel", direct=False, command="cancel"))
        await harness.settle()
        await quiet(redis, harness)
    assert ledger_lines(ledger) == ["task long_job", "cancelled long_job"]
    assert said(adapter, "⏹ Stopped long_job on test.") == ["⏹ Stopped long_job on test."]
    assert adapter.texts(GROUP)[-1] == "⏹ Stopped long_job on test."  # nothing else said
    assert said(adapter, FINISHED) == []


async def test_an_approver_by_group_stops_a_followed_task_as_they_stop_a_run(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    """One rule for who may stop: an approver who qualifies through a user group stops
    someone else's followed task too (the followed tasks once had their own check)."""
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    config = Settings.load(
        env_file=None,
        runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2},
        access={"PARLEY_APPROVERS": "S-leads"},
    )
    model = job(seconds=30)
    async with (
        parley(
            redis, model, server=tasks_server(ledger), follow=True, adapter=adapter, config=config
        ) as harness,
    ):
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        lead = message(GROUP, "/cancel", user="7", name="Bob", direct=False, command="cancel")
        await harness.submit(replace(lead, actor=replace(lead.actor, groups=("S-leads",))))
        await harness.settle()
        await quiet(redis, harness)
    assert ledger_lines(ledger) == ["task long_job", "cancelled long_job"]
    assert said(adapter, "⏹ Stopped long_job on test.") == ["⏹ Stopped long_job on test."]


class Refusing:
    """A follower whose Redis is away at the moment of the handoff."""

    async def follow(self, task: FollowedTask) -> None:
        raise RedisConnectionError("Redis is away")


async def test_a_task_that_cannot_be_followed_is_cancelled_and_the_call_fails(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    run = RunContext(conversation_id=GROUP.id, platform="telegram", user_id="42", chat_id="-100")
    async with toolbox(tasks_server(ledger)) as box:
        [long_job] = [t for t in box.servers["test"].tools if t.remote_name == "long_job"]
        context = ToolContext(run=run, deps={TaskFollower: Refusing()})
        with pytest.raises(ToolError, match="could not be followed"):
            await long_job({"seconds": 30}, context)
        await eventually(lambda: "cancelled long_job" in ledger_lines(ledger))
    assert ledger_lines(ledger) == ["task long_job", "cancelled long_job"]


async def test_a_hostile_result_is_posted_bounded_and_pings_nobody(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter(platform="slack")
    thread = ConversationKey(platform="slack", team_id="T1", chat_id="C1", thread_id="1.5")
    flood = "<!channel> read this " + "spam " * 5000
    model = ScriptedModel([turn(call("test__long_job", seconds=1.5, say=flood)), reply("Later.")])
    async with following(redis, model, ledger, adapter) as harness:
        await harness.submit(message(thread, "run the job", direct=False))
        await eventually(lambda: any(FINISHED in t for t in adapter.texts(thread)))
        await quiet(redis, harness)
    [finished] = [p.message for p in adapter.in_conversation(thread) if FINISHED in p.message.text]
    assert len(finished.text) < 3200  # bounded, not 25,000 characters
    assert finished.allowed_mentions == frozenset()  # the server's <!channel> pings nobody
    channel = ConversationKey(platform="slack", team_id="T1", chat_id="C1")
    assert adapter.in_conversation(channel) == []  # in the thread it came from, not the channel


async def test_an_unreadable_record_blocks_nothing(redis: aioredis.Redis, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    model = job(seconds=30)
    async with following(redis, model, ledger, adapter) as harness:
        keys = harness.runtime.keys
        for junk, due in (("junk-now", 0.0), ("junk-later", time.time() + 3600)):
            await redis.set(keys.followed_task(junk), b'{"task_id": 1')  # cut off mid-write
            await redis.zadd(keys.tasks_due, {junk: due})
        await harness.submit(message(GROUP, "run the job", direct=False))
        await harness.settle(within=60)
        assert said(adapter, LATER)
        assert not await redis.exists(keys.followed_task("junk-now"))  # the loop let it go
        await harness.submit(message(GROUP, "/cancel", direct=False, command="cancel"))
        await harness.settle()  # /cancel reads every record, "junk-later" too
    assert ledger_lines(ledger) == ["task long_job", "cancelled long_job"]
    assert said(adapter, "⏹ Stopped long_job on test.") == ["⏹ Stopped long_job on test."]


@tool
async def payroll(ctx: ToolContext) -> str:
    """The requester's payroll record, for them alone."""
    if not ctx.approved:
        raise ApprovalRequired("Look up your payroll and answer you privately", private=True)
    return "Ana earns 98,000"


async def test_a_private_runs_late_result_goes_to_the_requester_alone(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    """The run read something for Ana alone and answered her privately: the task it started
    then is hers too, so its result must not land in the group."""
    ledger = tmp_path / "ledger"
    adapter = RecordingAdapter()
    registry = builtin_registry()
    registry.register(payroll)
    model = ScriptedModel(
        [
            turn(call("payroll")),
            turn(call("test__long_job", seconds=2)),  # the model obeys: "post my pay later"
            reply("Privately: it will follow."),
        ]
    )
    async with (
        parley(
            redis, model, server=tasks_server(ledger), follow=True, adapter=adapter, tools=registry
        ) as harness,
    ):
        await harness.submit(message(GROUP, "my pay, then the job", direct=False))
        await harness.settle(within=60)
        [prompt] = adapter.in_conversation(GROUP)
        await harness.submit(click(GROUP, prompt, "approve"))
        await harness.settle(within=60)
        await eventually(lambda: bool(said(adapter, FINISHED)))
        await quiet(redis, harness)
    task_posts = [
        p.message for p in adapter.in_conversation(GROUP) if p.message.text.startswith(("⏳", "✅"))
    ]
    assert len(task_posts) == 2
    assert all(m.private_to == "42" for m in task_posts)
