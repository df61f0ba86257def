"""Slack agent sessions that outlive a process: a top-level DM run resumed by a press or a typed
answer goes on in the session that asked, and the native stop reaches a run through a gateway
that never saw it start (another replica, or one restarted since). Where each session lives is
in Redis (`bot/features/agent_sessions.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from adapters.base import ConversationKey
from adapters.slack import SlackAdapter, SlackConfig
from bot.features.agent_sessions import RedisSessionDirectory
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys
from tests.adapters.test_slack import SECRET, Slack, slack_bot, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.conversation.test_stop import Hanging
from tests.fakes import anthropic as fa
from tests.fakes import slack as fs
from tests.private_redis import private_redis


async def test_a_press_on_a_top_level_dm_run_moves_its_session_on(redis) -> None:
    model = ScriptedModel([turn(call("post_update", channel="CGEN")), reply("Posted.")])
    async with slack_bot(redis, model) as s:
        asked = fs.dm_event("UANA", "post the update")  # top level: no thread
        await s.event(asked)
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        (approval,) = s.fake.in_channel("DANA")
        await s.form(fs.block_action(approval, "Approve", user="UANA"))
        await until(lambda: any(p.text == "Posted." for p in s.fake.in_channel("DANA")))
        await s.harness.settle()
        # one session, at the message that asked: waiting for the press, then on to the end
        assert list(s.fake.sessions) == [("DANA", asked["ts"])]
        statuses = s.fake.sessions[("DANA", asked["ts"])].statuses
        assert statuses == ["processing", "suspended", "processing", "active"]


async def test_an_answer_typed_in_a_dm_goes_on_in_the_session_that_asked(redis) -> None:
    model = ScriptedModel(
        [turn(call("ask_user", question="Which week?", options=["This", "Next"])), reply("Done.")]
    )
    async with slack_bot(redis, model) as s:
        asked = fs.dm_event("UANA", "plan the offsite")
        await s.event(asked)
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        await s.event(fs.dm_event("UANA", "Next"))  # typed, top level: a new message
        await until(lambda: any(p.text == "Done." for p in s.fake.in_channel("DANA")))
        await s.harness.settle()
        assert list(s.fake.sessions) == [("DANA", asked["ts"])]  # no session for the answer
        statuses = s.fake.sessions[("DANA", asked["ts"])].statuses
        assert statuses == ["processing", "suspended", "processing", "active"]
        assert s.fake.sessions[("DANA", asked["ts"])].title == "plan the offsite"


@contextlib.asynccontextmanager
async def another_gateway(s: Slack, redis: aioredis.Redis) -> AsyncIterator[str]:
    """A second gateway on the same Redis and inbox that saw nothing before: its events URL."""
    other = SlackAdapter(
        config=SlackConfig(
            bot_token="xoxb-test-token", signing_secret=SECRET, api_url=s.fake.api_url
        ),
        handler=s.harness.runtime.inbox.submit,
        sessions=RedisSessionDirectory(redis, Keys(), ttl=3600),
    )
    await other.start()
    server = HttpServer("127.0.0.1", 0)
    server.add_route(*other.slack_route())
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}/slack/events"
    finally:
        await server.stop()
        await other.stop()


async def _post(url: str, event: dict[str, object]) -> None:
    body = json.dumps(fs.event_callback(event)).encode()
    async with aiohttp.ClientSession() as http:
        response = await http.post(url, data=body, headers=fs.signed(SECRET, body))
        assert response.status == 200


async def test_the_native_stop_reaches_a_dm_thread_run_through_a_gateway_that_never_saw_it(
    redis,
) -> None:
    model = Hanging()
    async with slack_bot(redis, model) as s:
        session = fs.message_ts()  # a thread of Parley's Messages tab
        await s.event(fs.dm_event("UANA", "write the quarterly report", thread_ts=session))
        await asyncio.wait_for(model.hanging.wait(), 10)
        await until(lambda: ("DANA", session) in s.fake.sessions)
        async with another_gateway(s, redis) as url:
            await _post(url, fs.agent_session_stopped("UANA", "DANA", session))
            await until(lambda: model.abandoned == 1)
            await s.harness.settle()
        (stopped,) = s.fake.in_channel("DANA", session)  # in the thread, not the DM itself
        assert stopped.text.startswith("⏹ Stopped: “write the quarterly report”.")
        assert [p.thread_ts for p in s.fake.in_channel("DANA")] == [session]  # none top level
        assert s.fake.sessions[("DANA", session)].statuses == ["processing", "active"]


async def test_the_native_stop_of_a_top_level_dm_run_reaches_it_through_another_gateway(
    redis,
) -> None:
    model = Hanging()
    async with slack_bot(redis, model) as s:
        asked = fs.dm_event("UANA", "write the quarterly report")
        await s.event(asked)
        await asyncio.wait_for(model.hanging.wait(), 10)
        await until(lambda: ("DANA", asked["ts"]) in s.fake.sessions)
        async with another_gateway(s, redis) as url:
            await _post(url, fs.agent_session_stopped("UANA", "DANA", asked["ts"]))
            await until(lambda: model.abandoned == 1)
            await s.harness.settle()
        (stopped,) = s.fake.in_channel("DANA")
        assert stopped.text.startswith("⏹ Stopped: “write the quarterly report”.")
        assert s.fake.sessions[("DANA", asked["ts"])].statuses == ["processing", "active"]


@pytest.mark.network
async def test_the_session_directory_rides_out_a_redis_outage(tmp_path: Path) -> None:
    dm = ConversationKey(platform="slack", chat_id="DANA", team_id="T1")
    in_thread = ConversationKey(platform="slack", chat_id="DANA", thread_id="9.1", team_id="T1")
    async with private_redis(tmp_path) as server:
        client = server.client()
        directory = RedisSessionDirectory(client, Keys(), ttl=60)
        try:
            await directory.began(dm, "1.1")
            await server.down()
            await directory.began(in_thread, "9.1")  # not recorded, and no error
            assert await directory.session_of(dm) is None  # unknown while Redis is away
            assert await directory.thread_of(in_thread) == (False, None)
            await server.up()
            await directory.began(in_thread, "9.1")
            assert await directory.session_of(dm) == "1.1"  # kept across the outage
            session = ConversationKey(
                platform="slack", chat_id="DANA", thread_id="1.1", team_id="T1"
            )
            assert await directory.thread_of(session) == (True, None)  # the DM itself
            assert await directory.thread_of(in_thread) == (True, "9.1")
            ttl = await client.pttl(Keys().agent_session(session.id))
            assert 0 < ttl <= 60_000
        finally:
            await client.aclose()


async def test_cancelling_a_pending_question_closes_its_session(redis) -> None:
    model = ScriptedModel(
        [turn(call("ask_user", question="Which week?", options=["This", "Next"]))]
    )
    async with slack_bot(redis, model) as s:
        asked = fs.dm_event("UANA", "plan the offsite")
        await s.event(asked)
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        await s.form(fs.slash_command("UANA", "cancel", channel="DANA"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2, within=10)
        await s.harness.settle()
        assert list(s.fake.sessions) == [("DANA", asked["ts"])]
        assert s.fake.sessions[("DANA", asked["ts"])].statuses == [
            "processing",
            "suspended",
            "closed",
        ]
        assert len(model.turn_requests) == 1  # nothing ran after the cancel


async def test_a_native_stop_mid_stream_leaves_one_message_saying_what_was_stopped(redis) -> None:
    from tests.adapters import test_slack_stream as streaming

    long = streaming.ANSWER * 2
    async with streaming.slack_bot(redis) as s:
        s.hosted.script(fa.streamed(long, pace=streaming.PACE, chunk=6))
        asked = fs.mention_event("UANA", "write about the tides")
        await s.event(asked)
        await streaming.until(lambda: any(p.streaming for p in s.fake.in_channel("CGEN")))
        (half,) = s.fake.in_channel("CGEN")
        half.streaming = False  # Slack stops the session's streams itself when stop is pressed
        await s.event(fs.agent_session_stopped("UANA", "CGEN", asked["ts"], (half.ts,)))
        await streaming.until(lambda: half.text.startswith("⏹"))
        await s.harness.settle()
        # the half answer became the one sentence every platform says, in the same message
        assert [p.text for p in s.fake.in_channel("CGEN")] == [
            "⏹ Stopped: “write about the tides”. Nothing more will run for it."
        ]
        assert s.fake.sessions[("CGEN", asked["ts"])].statuses == ["processing", "active"]


async def test_a_native_stop_when_nothing_runs_moves_a_session_left_processing(redis) -> None:
    async with slack_bot(redis, ScriptedModel([reply("Done.")], latency=0.5)) as s:
        asked = fs.mention_event("UANA", "tidy the backlog")
        await s.event(asked)
        key = ("CGEN", asked["ts"])
        await until(lambda: key in s.fake.sessions)
        s.fake.answer_error("agents.sessions.setStatus", "internal_error")  # the end: a blip
        await until(lambda: bool(s.fake.in_channel(*key)), within=10)
        await s.harness.settle()
        assert s.fake.sessions[key].statuses == ["processing"]  # Slack still shows it working
        await s.event(fs.agent_session_stopped("UANA", *key))
        await until(lambda: len(s.fake.in_channel(*key)) == 2, within=10)
        await s.harness.settle()
        assert s.fake.in_channel(*key)[-1].text == "There's nothing to cancel."
        assert s.fake.sessions[key].statuses == ["processing", "active"]
