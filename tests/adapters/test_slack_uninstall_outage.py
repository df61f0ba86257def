"""Slack uninstalls Parley (or revokes its bot token) while Redis is away.

The removal cannot be stored, so the gateway answers 503 (Slack sends the event again) and
keeps the removal, storing it as soon as Redis is back, without waiting for Slack's retry.
Meanwhile no process can look up a token (each lookup reads the count of removals in Redis),
and once Redis is back no process uses the revoked token, the worker that cached it included.
The wait is one warning and one info line, and the Slack health check says it is degraded.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.fernet import Fernet
from redis.exceptions import ConnectionError as RedisConnectionError
from slack_sdk.oauth.installation_store import Installation

from adapters.base import ConversationKey, DeliveryError, OutboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys
from bot.runtime.slack_installs import RedisInstallations
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until
from tests.private_redis import private_redis

SECRET = "uninstall-signing-secret"
KEY = Fernet.generate_key().decode()


def adapter(api_url: str, installations: RedisInstallations, *, gateway: bool) -> SlackAdapter:
    return SlackAdapter(
        config=SlackConfig(
            bot_token="",
            signing_secret=SECRET if gateway else None,
            api_url=api_url,
            client_id="111.222",
            client_secret="oauth-client-secret",
            public_url="https://parley.example.com",
        ),
        installations=installations,
    )


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int:
    raw = json.dumps(body).encode()
    async with http.post(url, data=raw, headers=fs.signed(SECRET, raw)) as response:
        return response.status


@pytest.mark.process
@pytest.mark.parametrize("event", ["app_uninstalled", "tokens_revoked"])
async def test_an_uninstall_heard_while_redis_is_away_is_stored_once_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, event: str
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.slack")
    async with private_redis(tmp_path) as server, FakeSlack() as fake:
        gateway_redis, worker_redis = server.client(), server.client()
        gateway_store = RedisInstallations(gateway_redis, Keys(), secret_key=KEY)
        await gateway_store.async_save(
            Installation(
                app_id="A1",
                team_id="T1ONE",
                bot_token="xoxb-one-1111",
                bot_id="B1",
                bot_user_id="UBOT1111",
                bot_scopes=["chat:write"],
                user_id="UANA",
            )
        )
        gateway = adapter(fake.api_url, gateway_store, gateway=True)
        worker_store = RedisInstallations(worker_redis, Keys(), secret_key=KEY)
        worker = adapter(fake.api_url, worker_store, gateway=False)
        http = aiohttp.ClientSession()
        route = HttpServer("127.0.0.1", 0)
        route.add_route(*gateway.slack_route())
        await route.start()
        url = f"http://127.0.0.1:{route.port}/slack/events"
        one = ConversationKey(platform="slack", chat_id="CT1ONE", team_id="T1ONE")
        try:
            await gateway.start()
            await worker.send(one, OutboundMessage(text="before"))  # the worker caches it

            await server.down()
            if event == "app_uninstalled":
                body = fs.event_callback({"type": "app_uninstalled"}, team="T1ONE")
            else:
                revoked = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UBOT1111"]}}
                body = fs.event_callback(revoked, team="T1ONE")
            fake.revoke("xoxb-one-1111")
            assert await post(http, url, body) == 503  # not done: Slack sends it again
            assert await post(http, url, body) == 503  # its first retry, Redis still away
            ok, detail = await gateway.health()
            assert "uninstalls degraded" in detail, detail
            with pytest.raises(RedisConnectionError):  # no process reads a token meanwhile
                await worker.send(one, OutboundMessage(text="while away"))

            await server.up()

            # stored by the gateway itself, before Slack's next retry
            async def stored() -> bool:
                return await worker_redis.get("parley:slack-install:team:T1ONE") is None

            await until(stored, within=15)
            with contextlib.suppress(DeliveryError):  # no installation serves T1ONE now
                await worker.send(one, OutboundMessage(text="after"))
            assert "uninstalls degraded" not in (await gateway.health())[1]
            assert await post(http, url, body) == 200  # Slack's later retry: nothing left to do
        finally:
            await http.close()
            await route.stop()
            await worker.stop()
            await gateway.stop()
            await gateway_redis.aclose()
            await worker_redis.aclose()
    used = [
        (c.body.get("text"), c.headers.get("Authorization", ""))
        for c in fake.method_calls("chat.postMessage")
    ]
    assert used[0] == ("before", "Bearer xoxb-one-1111")
    assert [text for text, auth in used if auth == "Bearer xoxb-one-1111"] == ["before"]
    lines = [r for r in caplog.records if r.name.startswith("adapters.slack")]
    said = [(r.levelno, r.getMessage()) for r in lines if "Slack removals" in r.getMessage()]
    assert [level for level, _ in said] == [logging.WARNING, logging.INFO], said
    assert "degraded" in said[0][1] and "recovered" in said[1][1]
    assert not [r for r in lines if r.levelno >= logging.ERROR]  # no trace per retry
