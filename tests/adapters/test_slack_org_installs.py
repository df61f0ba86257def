"""Org-wide (Enterprise Grid) installs: bolt-python's own org-wide `app_mention` and `message`
payloads (tests/corpus/slack, sources in SOURCES.md) through the real adapter with a team
allowlist. Slack names no team in `authorizations[0]` for such an install; the workspace is
the one the event names, the enterprise the install's."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.base import Inbound, InboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from bot.conversation.running import run_context
from bot.ops.http import HttpServer
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
