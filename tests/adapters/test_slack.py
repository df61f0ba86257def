"""The Slack adapter on the real slack-bolt/slack-sdk: signed HTTP requests and Socket Mode
envelopes in, a fake Web API out, wired to the real runtime with a scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from adapters.slack import SlackAdapter, SlackConfig
from agent.builtin_tools import builtin_registry
from agent.channels import read_channel_tool
from agent.protocols import MemoryStore
from agent.tools import Tool, tool
from bot.config import Settings
from bot.conversation.channels import Channels
from bot.features.agent_sessions import RedisSessionDirectory
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, parley, running
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
RAN: list[str] = []


@tool(side_effects=True, describe=lambda args: f"Post to #{args['channel']}")
async def post_update(channel: str) -> str:
    """Post an update.

    Args:
        channel: where
    """
    RAN.append(channel)
    return "posted"


class Slack:
    def __init__(self, fake: FakeSlack, harness: Harness, url: str, adapter: SlackAdapter) -> None:
        self.fake = fake
        self.harness = harness
        self.url = url
        self.adapter = adapter
        self.http = aiohttp.ClientSession()

    def recording(self) -> list[Any]:
        """What the adapter hands over, on its way to the real inbox."""
        seen: list[Any] = []
        handler = self.adapter.handler
        assert handler is not None

        async def record(event: Any) -> object:
            result = await handler(event)
            seen.append(event)
            return result

        self.adapter.handler = record
        return seen

    async def event(
        self,
        event: dict[str, Any],
        *,
        retry: int | None = None,
        age: float = 0.0,
        secret: str = SECRET,
        **kwargs: Any,
    ) -> aiohttp.ClientResponse:
        body = json.dumps(fs.event_callback(event, **kwargs)).encode()
        headers = fs.signed(secret, body, age=age)
        if retry is not None:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return await self.http.post(self.url, data=body, headers=headers)

    async def form(self, body: bytes) -> aiohttp.ClientResponse:
        headers = fs.signed(SECRET, body, content_type="application/x-www-form-urlencoded")
        return await self.http.post(self.url, data=body, headers=headers)


@contextlib.asynccontextmanager
async def slack_bot(
    redis: aioredis.Redis,
    model: ScriptedModel,
    *,
    approvers: list[str] | None = None,
    channels: bool = False,
    settings: dict[str, dict[str, Any]] | None = None,  # more settings sections
    memory: MemoryStore | None = None,
    extra_tools: tuple[Tool, ...] = (),
    **config: Any,
) -> AsyncIterator[Slack]:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="xoxb-test-token",
                signing_secret=SECRET,
                api_url=fake.api_url,
                approver_groups=tuple(a for a in approvers or [] if a.startswith("S")),
                **config,
            ),
            sessions=RedisSessionDirectory(redis, Keys(), ttl=3600),  # as the service has it
        )
        registry = builtin_registry()
        registry.register(post_update)
        for extra in extra_tools:
            registry.register(extra)
        if channels:  # the model may call read_channel, as the service offers it
            registry.register(read_channel_tool(Channels({"slack": adapter})))
        loaded = Settings.load(
            env_file=None,
            runtime={"PARLEY_RECLAIM_IDLE": 0.5},
            access={"PARLEY_APPROVERS": ",".join(approvers or [])},
            **(settings or {}),
        )
        async with on_events(
            redis, model, fake, adapter, tools=registry, config=loaded, memory=memory
        ) as slack:
            yield slack


@contextlib.asynccontextmanager
async def on_events(
    redis: aioredis.Redis,
    model: ScriptedModel,
    fake: FakeSlack,
    adapter: SlackAdapter | None = None,
    **options: Any,
) -> AsyncIterator[Slack]:
    """One Parley process (the harness's `parley`, given `options`) behind a real Slack
    adapter (by default one on `fake` with no more settings), its Events API route on a real
    listener."""
    adapter = adapter or SlackAdapter(
        config=SlackConfig(bot_token=fake.bot_token, signing_secret=SECRET, api_url=fake.api_url)
    )
    async with parley(redis, model, chat=adapter, **options) as harness:
        server = HttpServer("127.0.0.1", 0)
        server.add_route(*adapter.slack_route())
        await server.start()
        slack = Slack(fake, harness, f"http://127.0.0.1:{server.port}/slack/events", adapter)
        try:
            yield slack
        finally:
            await slack.http.close()
            await server.stop()


async def test_a_direct_message_round_trip(redis) -> None:
    async with slack_bot(
        redis, ScriptedModel([reply("Hi **Ana**, see [docs](https://d.example)")])
    ) as s:
        response = await s.event(fs.dm_event("UANA", "hello"))
        assert response.status == 200
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        post = s.fake.in_channel("DANA")[0]
        assert post.body == "Hi *Ana*, see <https://d.example|docs>" and post.thread_ts is None


async def test_a_mention_is_answered_in_its_thread_which_then_continues(redis) -> None:
    model = ScriptedModel([reply("First answer."), reply("Second answer.")])
    async with slack_bot(redis, model) as s:
        mention = fs.mention_event("UANA", "what's the plan?")
        await s.event(mention)
        # Slack also sends the same message as a plain channel message: not a second objective
        await s.event(
            fs.channel_message("UANA", f"<@{fs.BOT_USER}> what's the plan?", ts=mention["ts"])
        )
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        await s.event(fs.channel_message("UBOB", "and then?", thread_ts=mention["ts"]))
        await s.event(fs.channel_message("UBOB", "unrelated thread", thread_ts="1.000001"))
        await s.event(fs.channel_message("UBOB", "top-level chatter"))
        await until(lambda: len(s.fake.in_channel("CGEN")) == 2)
        await s.harness.settle()
        posts = s.fake.in_channel("CGEN")
        assert [p.body for p in posts] == ["First answer.", "Second answer."]
        assert all(p.thread_ts == mention["ts"] for p in posts)
        assert model.turn_requests[0].messages[-1].text.strip() == "what's the plan?"


async def test_retries_and_repeated_event_ids_answer_once(redis) -> None:
    async with slack_bot(redis, ScriptedModel([reply("once")])) as s:
        event = fs.dm_event("UANA", "hi")
        assert (await s.event(event, event_id="EvSAME")).status == 200
        assert (await s.event(event, event_id="EvSAME", retry=1)).status == 200
        assert (await s.event(event, event_id="EvSAME", retry=2)).status == 200
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        assert [p.body for p in s.fake.in_channel("DANA")] == ["once"]


async def test_forged_and_stale_requests_are_refused(redis) -> None:
    """Refused, and counted by reason in parley_webhook_rejected_total."""
    model = ScriptedModel([])
    before = {reason: rejected("slack", reason) for reason in ("signature", "stale", "malformed")}
    async with slack_bot(redis, model) as s:
        assert (await s.event(fs.dm_event("UANA", "x"), secret="wrong-secret")).status == 401
        assert (await s.event(fs.dm_event("UANA", "x"), age=6 * 60)).status == 401
        unsigned = await s.http.post(s.url, data=b"{}")
        assert unsigned.status == 401
        odd = await s.http.post(s.url, data=b"{}", headers={"X-Slack-Request-Timestamp": "soon"})
        assert odd.status == 400
        assert rejected("slack", "signature") - before["signature"] == 2
        assert rejected("slack", "stale") - before["stale"] == 1
        assert rejected("slack", "malformed") - before["malformed"] == 1
        await s.harness.settle()
        assert model.requests == [] and s.fake.posts == []
        assert await s.harness.redis.xlen(s.harness.runtime.keys.inbox) == 0


async def test_question_buttons(redis) -> None:
    model = ScriptedModel(
        [
            turn(call("ask_user", question="Which env?", options=["staging", "prod"])),
            reply("Staging it is."),
        ]
    )
    async with slack_bot(redis, model) as s:
        await s.event(fs.dm_event("UANA", "deploy"))
        await until(lambda: bool(s.fake.in_channel("DANA")))
        question = s.fake.in_channel("DANA")[0]
        assert [b["text"]["text"] for b in question.buttons] == ["staging", "prod"]
        assert (await s.form(fs.block_action(question, "staging", user="UANA"))).status == 200
        await until(lambda: len(s.fake.in_channel("DANA")) == 2)
        await s.harness.settle()
        assert s.fake.in_channel("DANA")[1].body == "Staging it is."
        assert question.buttons == [] and "staging" in question.body


async def test_approval_refusal_for_others_rejection_and_stale_clicks(redis) -> None:
    RAN.clear()
    model = ScriptedModel(
        [
            turn(call("post_update", channel="general")),
            reply("Posted."),
            turn(call("post_update", channel="random")),
            reply("Fine, I won't."),
        ]
    )
    async with slack_bot(redis, model, approvers=["SADMINS"]) as s:
        s.fake.groups["SADMINS"] = ["UBOSS"]
        mention = fs.mention_event("UANA", "post the update")
        await s.event(mention)
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        approval = s.fake.in_channel("CGEN")[0]
        assert "Post to #general" in approval.body
        styles = [(b["text"]["text"], b.get("style")) for b in approval.buttons]
        assert styles == [("Approve", "primary"), ("Reject", "danger")]
        original_buttons = list(approval.blocks)

        await s.form(fs.block_action(approval, "Approve", user="UMAL"))
        await until(lambda: any(p.ephemeral_to == "UMAL" for p in s.fake.posts))
        await s.harness.settle()
        ephemeral = next(p for p in s.fake.posts if p.ephemeral_to == "UMAL")
        assert (
            ephemeral.text == "Only <@UANA> can approve this."
            and ephemeral.thread_ts == mention["ts"]
        )
        assert RAN == [] and approval.buttons

        await s.form(fs.block_action(approval, "Approve", user="UBOSS"))  # in the approver group
        await until(lambda: RAN == ["general"])
        await s.harness.settle()
        assert "Approved by <@UBOSS>" in approval.body and approval.buttons == []
        assert s.fake.method_calls("chat.update")

        await s.event(fs.channel_message("UANA", "now random", thread_ts=mention["ts"]))
        await until(lambda: len([p for p in s.fake.in_channel("CGEN") if p.buttons]) == 1)
        second = next(p for p in s.fake.in_channel("CGEN") if p.buttons)
        await s.form(fs.block_action(second, "Reject", user="UANA"))
        await until(lambda: "Fine, I won't." in [p.body for p in s.fake.in_channel("CGEN")])
        await s.harness.settle()
        assert RAN == ["general"] and "Rejected by <@UANA>" in second.body

        # a client still showing the old buttons clicks Approve again
        old = fs.Post(approval.channel, approval.ts, "", original_buttons, approval.thread_ts)
        await s.form(fs.block_action(old, "Approve", user="UANA"))
        await until(
            lambda: any(
                p.ephemeral_to == "UANA" and "already approved" in p.text for p in s.fake.posts
            )
        )


async def test_a_very_long_reply_arrives_complete(redis) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 18 for i in range(100)]
    text = "\n\n".join(paragraphs)
    assert len(text) > 50_000
    async with slack_bot(redis, ScriptedModel([reply(text)])) as s:
        await s.event(fs.dm_event("UANA", "write an essay"))
        await until(lambda: "Paragraph 99" in "".join(p.body for p in s.fake.in_channel("DANA")))
        await s.harness.settle()
        posts = s.fake.in_channel("DANA")
        assert len(posts) >= 1
        for post in posts:
            assert len(post.blocks) <= 50
            assert all(len(b["text"]["text"]) <= 3000 for b in post.blocks)
            assert len(post.text) <= 40_000
        delivered = "".join(p.body for p in posts)
        for i in range(100):
            assert f"Paragraph {i}: " in delivered
        assert delivered.count("lorem ipsum") == 100 * 18


async def test_the_slash_command_answers_privately(redis) -> None:
    async with slack_bot(redis, ScriptedModel([])) as s:
        response = await s.form(fs.slash_command("UANA", "status"))
        assert response.status == 200
        await until(lambda: bool(s.fake.posts))
        await s.harness.settle()
        post = s.fake.posts[0]
        assert post.ephemeral_to == "UANA" and "not working on anything" in post.body
        await s.form(fs.slash_command("UANA", "help"))
        await until(lambda: len(s.fake.posts) == 2)
        help_post = s.fake.posts[1]
        assert help_post.ephemeral_to == "UANA"  # help is for the one who asked
        assert "/parley memories" in help_post.body and "• /memories" not in help_post.body


async def test_ack_is_fast_while_the_model_is_slow(redis) -> None:
    model = ScriptedModel([reply("slow answer")], latency=4.0)
    async with slack_bot(redis, model) as s:
        started = time.monotonic()
        response = await s.event(fs.dm_event("UANA", "think hard"))
        acked = time.monotonic() - started
        assert response.status == 200 and acked < 3.0
        assert s.fake.posts == []
        await until(lambda: bool(s.fake.posts), within=10)


async def test_bots_edits_joins_and_other_workspaces_are_ignored(redis) -> None:
    model = ScriptedModel([])
    async with slack_bot(
        redis, model, allowed_teams=("T1",), allowed_channels=("DANA", "CGEN")
    ) as s:
        await s.event(fs.dm_event("UANA", "from a bot", bot_id="B2"))
        await s.event(fs.dm_event(fs.BOT_USER, "from myself"))
        await s.event(fs.dm_event("UANA", "edited", subtype="message_changed"))
        await s.event(fs.channel_message("UANA", "joined", subtype="channel_join", thread_ts="1.1"))
        await s.event(fs.dm_event("UEVE", "other team"), team="T9")
        await s.event(fs.mention_event("UANA", "wrong channel", channel="COTHER"))
        await asyncio.sleep(0.3)
        await s.harness.settle()
        assert model.requests == [] and s.fake.posts == []
        assert await s.harness.redis.xlen(s.harness.runtime.keys.inbox) == 0


async def test_over_long_messages_and_bare_mentions_are_handed_over_by_kind(redis) -> None:
    model = ScriptedModel([])
    async with slack_bot(redis, model, max_message_chars=50) as s:
        seen = s.recording()
        assert (await s.event(fs.mention_event("UANA", "x" * 80))).status == 200
        assert (await s.event(fs.mention_event("UANA", ""))).status == 200
        assert (await s.event(fs.dm_event("UANA", "y" * 60))).status == 200
        await until(lambda: len(seen) == 3, within=20)
        await s.harness.settle()
        assert [(e.kind, e.text, e.length, e.is_direct) for e in seen] == [
            ("too_long", "x" * 50, 80, False),
            ("bare_mention", "", 0, False),
            ("too_long", "y" * 50, 60, True),
        ]
        assert model.requests == []
        # The adapter says nothing itself; the engine answers each, in its thread.
        await until(lambda: len(s.fake.posts) == 3, within=20)
        texts = sorted(p.text for p in s.fake.posts)
        assert texts[2].startswith("Yes? Tell me what you need in a reply here")
        assert all(t.startswith("That message is too long for me") for t in texts[:2])


async def test_rate_limits_are_respected(redis) -> None:
    async with slack_bot(redis, ScriptedModel([reply("after the wait")])) as s:
        s.fake.fail_next("chat.postMessage", retry_after=1)
        await s.event(fs.dm_event("UANA", "hi"))
        await until(lambda: bool(s.fake.posts), within=8)
        calls = s.fake.method_calls("chat.postMessage")
        assert len(calls) == 2 and calls[1].received_at - calls[0].received_at >= 0.95


async def test_socket_mode_round_trip(redis) -> None:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="xoxb-test-token", app_token="xapp-test", api_url=fake.api_url
            )
        )
        async with running(
            redis, ScriptedModel([reply("over the socket")]), adapter=adapter
        ) as harness:  # type: ignore[arg-type]
            adapter.handler = harness.runtime.inbox.submit
            await adapter.start()
            try:
                envelope = {
                    "envelope_id": "env-1",
                    "type": "events_api",
                    "accepts_response_payload": False,
                    "retry_attempt": 0,
                    "retry_reason": "",
                    "payload": fs.event_callback(fs.dm_event("UANA", "hi")),
                }
                await fake.socket_send(envelope)
                await until(lambda: bool(fake.posts), within=8)
                await until(lambda: any(a.get("envelope_id") == "env-1" for a in fake.socket_acks))
                assert fake.posts[0].body == "over the socket"
                assert await adapter.health() == (True, "Socket Mode connected")
                await adapter.stop_receiving()
                assert await adapter.health() == (False, "Socket Mode is not connected")
            finally:
                await adapter.stop()
        assert len(fake.method_calls("apps.connections.open")) == 1


async def test_thread_status_while_working_is_cleared_at_the_end(redis) -> None:
    async with slack_bot(redis, ScriptedModel([reply("took a while")], latency=0.8)) as s:
        mention = fs.mention_event("UANA", "think about it")
        await s.event(mention)
        await until(lambda: bool(s.fake.in_channel("CGEN")), within=8)
        await s.harness.settle()
        statuses = [c.body for c in s.fake.method_calls("assistant.threads.setStatus")]
        assert statuses[0] == {
            "channel_id": "CGEN",
            "thread_ts": mention["ts"],
            "status": "Thinking…",
        }
        assert statuses[-1]["status"] == ""


def rejected(platform: str, reason: str) -> float:
    labels = {"platform": platform, "reason": reason}
    return REGISTRY.get_sample_value("parley_webhook_rejected_total", labels) or 0.0
