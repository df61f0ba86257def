"""Slack answers while they are written: the real runtime and slack-bolt/slack-sdk against
the fake Web API's chat streaming methods, the real Anthropic client against the fake
Messages API's server-sent events."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from adapters.slack import SlackAdapter, SlackConfig
from agent.builtin_tools import builtin_registry
from agent.channels import read_channel_tool
from agent.llm.anthropic import AnthropicModel
from bot.config import Settings
from bot.conversation.channels import Channels
from bot.ops.http import HttpServer
from tests.bot.harness import Harness, running
from tests.fakes import anthropic as fa
from tests.fakes import slack as fs
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.helpers import until

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
ANSWER = (
    "Here is a longer answer that arrives in pieces, so the thread shows it growing "
    "long before the model has finished writing the last sentence of it."
)
PACE = 0.06  # seconds between 6-character deltas: ~1.5 s of writing, well past the first show


class Bot:
    def __init__(self, fake: FakeSlack, hosted: FakeAnthropic, harness: Harness, url: str):
        self.fake, self.hosted, self.harness, self.url = fake, hosted, harness, url
        self.http = aiohttp.ClientSession()

    async def event(self, event: dict[str, Any]) -> None:
        body = json.dumps(fs.event_callback(event)).encode()
        response = await self.http.post(self.url, data=body, headers=fs.signed(SECRET, body))
        assert response.status == 200


@contextlib.asynccontextmanager
async def slack_bot(
    redis: aioredis.Redis,
    *,
    channels: bool = False,
    make_model: Callable[[FakeAnthropic], Any] | None = None,  # default: Anthropic alone
    **streaming: Any,
) -> AsyncIterator[Bot]:
    async with FakeSlack() as fake, FakeAnthropic() as hosted:
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="xoxb-test-token", signing_secret=SECRET, api_url=fake.api_url
            )
        )
        model = (
            make_model(hosted)
            if make_model is not None
            else AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url)
        )
        settings = Settings.load(
            env_file=None,
            runtime={"PARLEY_RECLAIM_IDLE": 0.5},
            streaming={"PARLEY_STREAM_INTERVAL": 0.1, **streaming},
        )
        try:
            registry = builtin_registry()
            if channels:  # the model may call read_channel, as the service offers it
                registry.register(read_channel_tool(Channels({"slack": adapter})))
            async with running(
                redis,
                model,  # type: ignore[arg-type]
                adapter=adapter,  # type: ignore[arg-type]
                config=settings,
                tools=registry,
            ) as harness:
                adapter.handler = harness.runtime.inbox.submit
                await adapter.start()
                server = HttpServer("127.0.0.1", 0)
                server.add_route(*adapter.slack_route())
                await server.start()
                bot = Bot(fake, hosted, harness, f"http://127.0.0.1:{server.port}/slack/events")
                try:
                    yield bot
                finally:
                    await bot.http.close()
                    await server.stop()
                    await adapter.stop()
        finally:
            await model.close()


def finished(fake: FakeSlack) -> bool:
    return any(not p.streaming and p.text.replace("\n", " ") for p in fake.in_channel("CGEN"))


async def test_a_thread_answer_streams_naming_the_recipient(redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        mention = fs.mention_event("UANA", "tell me")
        await s.event(mention)
        await until(lambda: bool(s.fake.in_channel("CGEN")) and finished(s.fake))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.text == ANSWER and post.thread_ts == mention["ts"] and not post.streaming
        assert len(post.appends) >= 3, "partial text was visible before the end"
        assert all(ANSWER.startswith(seen) for seen in post.appends) and post.appends[0] != ANSWER
        start = s.fake.method_calls("chat.startStream")[0].body
        assert start["recipient_user_id"] == "UANA" and start["recipient_team_id"] == fs.TEAM
        assert start["thread_ts"] == mention["ts"]
        assert not s.fake.method_calls("chat.postMessage")
        assert len(s.fake.method_calls("chat.stopStream")) == 1


async def test_a_refused_stream_falls_back_to_one_ordinary_message(redis) -> None:
    async with slack_bot(redis) as s:
        s.fake.external_users.add("UEXT")  # a Slack Connect user: Slack says user_not_found
        s.hosted.script(fa.streamed(ANSWER, pace=0.1, chunk=10))  # 1.5 s: it streams
        await s.event(fs.mention_event("UEXT", "tell me"))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.body.replace("\n", " ") == ANSWER
        assert len(s.fake.method_calls("chat.startStream")) == 1
        assert len(s.fake.method_calls("chat.postMessage")) == 1


async def test_a_stream_refused_midway_is_replaced_by_the_whole_answer(redis) -> None:
    async with slack_bot(redis) as s:
        s.fake.refuse_stream("chat.appendStream", "ratelimited")
        s.hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        await s.event(fs.mention_event("UANA", "tell me"))
        await until(lambda: bool(s.fake.in_channel("CGEN")) and s.fake.in_channel("CGEN")[0].edits)
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.edits == 1 and post.body.replace("\n", " ") == ANSWER
        assert not s.fake.method_calls("chat.postMessage")


async def test_a_refused_stop_is_replaced_not_doubled(redis) -> None:
    async with slack_bot(redis) as s:
        s.fake.refuse_stream("chat.stopStream", "internal_error")
        s.hosted.script(fa.streamed(ANSWER, pace=0.2, chunk=20))  # 1.4 s: it streams
        await s.event(fs.mention_event("UANA", "tell me"))
        await until(lambda: bool(s.fake.in_channel("CGEN")) and s.fake.in_channel("CGEN")[0].edits)
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.body.replace("\n", " ") == ANSWER
        assert not s.fake.method_calls("chat.postMessage")


async def test_a_direct_message_shows_the_assistant_status(redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(fa.Item("text", [{"type": "text", "text": "done"}], delay=0.9))
        dm = fs.dm_event("UANA", "slow one")
        await s.event(dm)
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        statuses = [c.body for c in s.fake.method_calls("assistant.threads.setStatus")]
        assert statuses[0]["thread_ts"] == dm["ts"] and statuses[0]["status"]
        assert statuses[-1]["status"] == ""


async def test_thinking_before_a_tool_call_is_taken_back_and_shown_as_status(redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(
            # the thought is written over about 1.6 s, so it is shown before the tool call
            fa.tool(
                "calculator", thought="Let me work that out first.", expression="6*7", pace=0.4
            ),
            fa.streamed("It is 42, as the calculator says.", pace=0.02, chunk=5),
        )
        await s.event(fs.mention_event("UANA", "6*7?"))
        await until(lambda: finished(s.fake))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.text == "It is 42, as the calculator says."
        (taken_back,) = s.fake.deleted
        assert taken_back.text and "Let me work that out first.".startswith(taken_back.text)
        statuses = [c.body["status"] for c in s.fake.method_calls("assistant.threads.setStatus")]
        assert "Let me work that out first." in statuses


async def test_an_answer_from_a_private_read_is_never_streamed_into_the_thread(redis) -> None:
    """A private channel read into a shared thread, approved: the answer is written slowly
    enough to stream, and still reaches only the requester, whole, at the end."""
    secret = "Finance: the payroll run moves to Friday and the bonus pool is 310k. " * 2
    async with slack_bot(redis, channels=True) as s:
        s.fake.channel_names.update({"CGEN": "general", "C0FINANCE": "finance"})
        s.fake.members.update(
            {"CGEN": ["UANA", "UBOB", fs.BOT_USER], "C0FINANCE": ["UANA", fs.BOT_USER]}
        )
        s.fake.history["C0FINANCE"] = [
            {"type": "message", "user": "UANA", "text": secret, "ts": f"{time.time() - 9:.6f}"}
        ]
        s.hosted.script(
            fa.tool("read_channel", channel="#finance", since="1d"),
            fa.streamed(secret, pace=PACE, chunk=6),
        )
        await s.event(fs.mention_event("UANA", "<@UBOT> what's new in #finance?"))
        await until(lambda: any(p.buttons for p in s.fake.in_channel("CGEN")))
        await s.harness.settle()
        prompt = next(p for p in s.fake.in_channel("CGEN") if p.buttons)
        press = fs.block_action(prompt, "Approve", user="UANA")
        headers = fs.signed(SECRET, press, content_type="application/x-www-form-urlencoded")
        async with s.http.post(s.url, data=press, headers=headers) as response:
            assert response.status == 200
        await until(lambda: any(p.ephemeral_to == "UANA" for p in s.fake.posts))
        await s.harness.settle()
    answer = next(p for p in s.fake.posts if p.ephemeral_to == "UANA")
    assert answer.text.replace("\n", " ").strip() == secret.strip()
    # the one stream is the approval prompt's proposed plan, before anything was read
    (proposal,) = s.fake.method_calls("chat.startStream")
    assert proposal.body["chunks"][0]["title"] == "Proposed plan"
    assert not s.fake.method_calls("chat.appendStream")
    public = [p for p in s.fake.posts if p.ephemeral_to is None]
    assert all("payroll" not in p.text + p.body for p in public)
    statuses = s.fake.method_calls("assistant.threads.setStatus")
    assert all("payroll" not in str(call.body) for call in statuses)
