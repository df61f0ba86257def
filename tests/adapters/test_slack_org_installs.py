"""Org-wide (Enterprise Grid) installs: bolt-python's own org-wide `app_mention` and `message`
payloads (tests/corpus/slack, sources in SOURCES.md) through the real adapter with a team
allowlist. Slack names no team in `authorizations[0]` for such an install; the workspace is
the one the event names, the enterprise the install's."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.base import Inbound, InboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from bot.conversation.running import run_context
from bot.ops.http import HttpServer
from tests.adapters.test_slack import SECRET as BOT_SECRET
from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack

pytestmark = pytest.mark.network  # a fake Slack on a local port

SECRET = "org-secret"
CORPUS = Path(__file__).parent.parent / "corpus" / "slack"


def _payload(file: str) -> dict[str, Any]:
    doc = json.loads((CORPUS / file).read_text())
    return copy.deepcopy(doc["payloads"])


def org_mention() -> dict[str, Any]:
    """test_events_say_stream.py's `org_app_mention_event_body`, addressed to the fake's bot
    (the one field that names the bot: W111 → UBOT)."""
    (body,) = [
        p
        for p in _payload("bolt-python__tests_scenario_tests_async_test_events_say_stream.json")
        if p["event"]["type"] == "app_mention"
    ]
    body["event"]["text"] = body["event"]["text"].replace("<@W111>", f"<@{fs.BOT_USER}>")
    return body


def org_message() -> dict[str, Any]:
    """test_events_org_apps.py's org-wide `message` event."""
    (body,) = [
        p
        for p in _payload("bolt-python__tests_scenario_tests_async_test_events_org_apps.json")
        if p["event"]["type"] == "message"
    ]
    return body


@contextlib.asynccontextmanager
async def org_app(**config: Any) -> AsyncIterator[tuple[list[Inbound], Any]]:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="xoxb-org", signing_secret=SECRET, api_url=fake.api_url, **config
            )
        )
        seen: list[Inbound] = []

        async def handler(event: Inbound) -> None:
            seen.append(event)

        adapter.handler = handler
        await adapter.initialize()
        server = HttpServer("127.0.0.1", 0)
        server.add_route(*adapter.slack_route())
        await server.start()
        url = f"http://127.0.0.1:{server.port}/slack/events"
        try:
            async with aiohttp.ClientSession() as http:

                async def send(body: dict[str, Any], retry: int | None = None) -> int:
                    raw = json.dumps(body).encode()
                    headers = fs.signed(SECRET, raw)
                    if retry is not None:
                        headers["X-Slack-Retry-Num"] = str(retry)
                    async with http.post(url, data=raw, headers=headers) as response:
                        return response.status

                yield seen, send
        finally:
            await server.stop()
            await adapter.stop()


@pytest.mark.parametrize("allowed", [("T111",), ("E111",)])
async def test_an_org_wide_mention_is_answered_with_a_team_allowlist(allowed) -> None:
    """The workspace (T111) or the whole organisation (E111) on the allowlist admits it."""
    async with org_app(allowed_teams=allowed) as (seen, send):
        assert await send(org_mention()) == 200
    assert len(seen) == 1
    event = seen[0]
    assert isinstance(event, InboundMessage)
    assert event.text == "Hi there!"
    assert (event.actor.user_id, event.actor.team_id, event.actor.enterprise_id) == (
        "W222",
        "T111",
        "E111",
    )
    assert event.conversation.team_id == "T111" and event.conversation.chat_id == "C111"
    # the team's memories are the workspace's: the run is scoped to T111, not to nobody
    assert run_context(event).team_id == "T111"


async def test_an_org_wide_dm_message_is_answered_with_a_team_allowlist() -> None:
    """The org-wide `message` payload as a DM (only `channel_type` changed: as printed it is
    channel chatter, which Slack sends as app_mention when Parley is named)."""
    body = org_message()
    body["event"]["channel_type"] = "im"
    body["event"]["channel"] = "D111"
    async with org_app(allowed_teams=("T111",)) as (seen, send):
        assert await send(body) == 200
    assert len(seen) == 1
    assert (seen[0].actor.user_id, seen[0].actor.team_id) == ("W111", "T111")
    assert seen[0].actor.enterprise_id == "E111"


async def test_an_org_wide_event_outside_the_allowlist_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.slack")
    body = org_mention()
    async with org_app(allowed_teams=("T999",)) as (seen, send):
        assert await send(body) == 200
        assert await send(body, retry=1) == 200  # Slack's retry of the same event
    assert seen == []
    lines = [r.getMessage() for r in caplog.records if "not answered" in r.getMessage()]
    assert lines == [
        "slack app_mention Ev111 not answered: not on the allowlists "
        "(team T111, enterprise E111, channel C111)"
    ]


async def test_the_org_wide_message_as_printed_is_chatter_said_in_the_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="adapters.slack")
    async with org_app(allowed_teams=("T111",)) as (seen, send):
        assert await send(org_message()) == 200
    assert seen == []
    (line,) = [r for r in caplog.records if "not answered" in r.getMessage()]
    assert "channel chatter" in line.getMessage() and line.levelno == logging.DEBUG


async def test_a_slack_connect_guest_of_an_org_install_counts_by_their_own_team() -> None:
    """Break it: in a shared channel the workspace the event names is the host's; the guest's
    own team (user_team) is what the allowlist sees."""
    body = org_mention()
    body["is_ext_shared_channel"] = True
    body["event"]["user_team"] = "T9EXT"
    async with org_app(allowed_teams=("T111",)) as (seen, send):
        assert await send(body) == 200
    assert seen == []


async def test_read_channel_with_an_organisation_allowlist_reads_its_workspaces_channels(
    redis,
) -> None:
    """Only E111 on the allowlist: a person of the organisation (bolt-python's org-wide
    `message`, as a DM) has Parley read a channel of another of its workspaces (team.info
    names the organisation) and one whose conversations.info names it; a channel of another
    organisation stays closed, and so does one whose workspace Slack won't say anything of."""
    now = time.time()
    model = ScriptedModel(
        [
            turn(call("read_channel", "r1", channel="C222", since="1d")),
            turn(call("read_channel", "r2", channel="C333", since="1d")),
            turn(call("read_channel", "r3", channel="C9OUT", since="1d")),
            turn(call("read_channel", "r4", channel="C444", since="1d")),
            reply("Done."),
        ]
    )
    body = org_message()
    body["event"] |= {"channel_type": "im", "channel": "D111"}
    async with slack_bot(redis, model, channels=True, allowed_teams=("E111",)) as s:
        s.fake.members["D111"] = ["W111", fs.BOT_USER]
        for channel, team, said in (
            ("C222", "T222", "standup moved to 10"),
            ("C333", "T333", "budget review on Friday"),
            ("C9OUT", "T9EXT", "their launch plan"),
            ("C444", "T444", "an unknown workspace's news"),
        ):
            s.fake.members[channel] = ["W111", fs.BOT_USER]
            s.fake.channel_teams[channel] = [team]
            s.fake.history[channel] = [
                {"type": "message", "user": "W111", "text": said, "ts": f"{now - 60:.6f}"}
            ]
        s.fake.team_orgs |= {"T222": "E111", "T9EXT": "E999"}  # T333, T444: not told
        s.fake.channel_orgs["C333"] = "E111"  # Slack names the organisation in the channel
        raw = json.dumps(body).encode()
        async with s.http.post(s.url, data=raw, headers=fs.signed(BOT_SECRET, raw)) as answer:
            assert answer.status == 200
        await until(lambda: bool(s.fake.in_channel("D111")))
        await s.harness.settle()
    results = [r.messages[-1].tool_results[0] for r in model.turn_requests[1:]]
    assert not results[0].is_error and "standup moved to 10" in results[0].content
    assert not results[1].is_error and "budget review on Friday" in results[1].content
    assert results[2].is_error and "outside the channels" in results[2].content
    assert results[3].is_error and "outside the channels" in results[3].content
    read = [c.body["channel"] for c in s.fake.method_calls("conversations.history")]
    assert read == ["C222", "C333"]
    asked = [c.body.get("team") for c in s.fake.method_calls("team.info")]
    assert sorted(asked) == ["T222", "T444", "T9EXT"]  # C333's own answer was enough
