"""Several workspaces install Parley through Bolt's OAuth v2 flow (/slack/install,
/slack/oauth_redirect) against the fake Slack, which serves oauth.v2.access; each workspace is
answered with its own bot token, kept encrypted in Redis; uninstalling removes one, and a
revoked token stops being used."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store import Installation

from adapters.base import ConversationKey, DeliveryError, OutboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from agent.builtin_tools import builtin_registry
from bot.config import Settings
from bot.features.agent_sessions import RedisSessionDirectory
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys
from bot.runtime.slack_installs import RedisInstallations, RedisOAuthStates
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import Harness, running
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until

# slack_sdk 3.47's oauth.v2.access authenticates with aiohttp's BasicAuth, which aiohttp 3.14
# deprecates (a warning, an error under this suite's filterwarnings)
pytestmark = pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")

SECRET = "install-signing-secret"
KEY = Fernet.generate_key().decode()
PUBLIC = "https://parley.example.com"


class Installed:
    def __init__(self, fake: FakeSlack, harness: Harness, base: str, adapter: SlackAdapter):
        self.fake = fake
        self.harness = harness
        self.base = base
        self.adapter = adapter
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())

    async def install(self, code: str) -> aiohttp.ClientResponse:
        """A person presses Add to Slack, approves, and Slack sends them back with `code`."""
        page = await self.http.get(f"{self.base}/slack/install")
        assert page.status == 200
        html = await page.text()
        link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', html)
        assert link is not None, html
        query = parse_qs(urlsplit(link.group(1).replace("&amp;", "&")).query)
        assert query["redirect_uri"] == [f"{PUBLIC}/slack/oauth_redirect"]
        assert "chat:write" in query["scope"][0]
        cookie = page.headers["Set-Cookie"].split(";")[0]  # the browser keeps the state cookie
        return await self.http.get(
            f"{self.base}/slack/oauth_redirect",
            params={"code": code, "state": query["state"][0]},
            headers={"Cookie": cookie},
        )

    async def event(self, body: dict[str, Any]) -> int:
        raw = json.dumps(body).encode()
        async with self.http.post(
            f"{self.base}/slack/events", data=raw, headers=fs.signed(SECRET, raw)
        ) as response:
            return response.status


@contextlib.asynccontextmanager
async def installable(
    redis: aioredis.Redis, model: ScriptedModel, allowed: tuple[str, ...] = ()
) -> AsyncIterator[Installed]:
    async with FakeSlack() as fake:
        store = RedisInstallations(redis, Keys(), secret_key=KEY, allowed_teams=allowed)
        adapter = SlackAdapter(
            config=SlackConfig(
                bot_token="",
                signing_secret=SECRET,
                api_url=fake.api_url,
                client_id="111.222",
                client_secret="oauth-client-secret",
                scopes=("app_mentions:read", "chat:write"),
                public_url=PUBLIC,
                allowed_teams=allowed,
            ),
            sessions=RedisSessionDirectory(redis, Keys(), ttl=3600),
            installations=store,
            oauth_states=RedisOAuthStates(redis, Keys()),
        )
        config = Settings.load(env_file=None, runtime={"PARLEY_RECLAIM_IDLE": 0.5})
        async with running(
            redis, model, adapter=adapter, tools=builtin_registry(), config=config
        ) as harness:  # type: ignore[arg-type]
            adapter.handler = harness.runtime.inbox.submit
            await adapter.start()
            server = HttpServer("127.0.0.1", 0)
            server.add_route(*adapter.slack_route())
            for route in adapter.oauth_routes():
                server.add_route(*route)
            await server.start()
            installed = Installed(fake, harness, f"http://127.0.0.1:{server.port}", adapter)
            try:
                yield installed
            finally:
                await installed.http.close()
                await server.stop()
                await adapter.stop()


def mention(team: str, bot_user: str, text: str, **envelope: Any) -> dict[str, Any]:
    event = fs.mention_event("UANA", text, channel=f"C{team}")
    event["text"] = f"<@{bot_user}> {text}"
    body = fs.event_callback(event, team=team)
    body["authorizations"] = [{"team_id": team, "user_id": bot_user, "is_bot": True}]
    return body | envelope


async def test_two_workspaces_install_and_each_is_answered_with_its_own_token(redis) -> None:
    model = ScriptedModel([reply("Hello, one."), reply("Hello, two."), reply("Still here.")])
    async with installable(redis, model) as s:
        s.fake.install("code-one", team="T1ONE", token="xoxb-one-1111")
        s.fake.install("code-two", team="T2TWO", token="xoxb-two-2222")
        for code in ("code-one", "code-two"):
            done = await s.install(code)
            assert done.status == 200, await done.text()
        # kept encrypted: no token in plain text anywhere in Redis
        async for key in redis.scan_iter("parley:slack-install:*"):
            raw = await redis.get(key)
            assert b"xoxb-" not in raw
        assert len([k async for k in redis.scan_iter("parley:slack-install:*")]) == 2

        assert await s.event(mention("T1ONE", "UBOT1111", "hi from one")) == 200
        await until(lambda: any(p.text == "Hello, one." for p in s.fake.posts))
        await s.harness.settle()
        assert await s.event(mention("T2TWO", "UBOT2222", "hi from two")) == 200
        await until(lambda: any(p.text == "Hello, two." for p in s.fake.posts))
        await s.harness.settle()
        tokens = {p.text: p.token for p in s.fake.posts}
        assert tokens["Hello, one."] == "xoxb-one-1111"
        assert tokens["Hello, two."] == "xoxb-two-2222"
        assert model.turn_requests[0].messages[-1].text.endswith("hi from one")  # mention cut

        # workspace two uninstalls Parley: its installation goes, and its events go unanswered
        uninstalled = fs.event_callback({"type": "app_uninstalled"}, team="T2TWO")
        assert await s.event(uninstalled) == 200
        assert await redis.get("parley:slack-install:team:T2TWO") is None
        assert await redis.get("parley:slack-install:team:T1ONE") is not None
        await s.event(mention("T2TWO", "UBOT2222", "are you there?"))

        # workspace one revokes the bot token: removed too, and never used again
        s.fake.revoke("xoxb-one-1111")
        revoked = fs.event_callback(
            {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UBOT1111"]}}, team="T1ONE"
        )
        assert await s.event(revoked) == 200
        assert await redis.get("parley:slack-install:team:T1ONE") is None
        await s.event(mention("T1ONE", "UBOT1111", "hello again"))
        await s.harness.settle()
        assert len(model.turn_requests) == 2  # neither later mention ran
        assert [p.text for p in s.fake.posts] == ["Hello, one.", "Hello, two."]


async def test_an_org_wide_install_answers_each_workspace_of_the_organisation(redis) -> None:
    model = ScriptedModel([reply("Hello, org.")])
    async with installable(redis, model) as s:
        s.fake.install("code-org", team=None, enterprise="E111", token="xoxb-org-9999")
        assert (await s.install("code-org")).status == 200
        # bolt-python's org-wide mention (tests/corpus), addressed to this install's bot
        body = mention("T111", "UBOT9999", "hi from a workspace of the org")
        body |= {
            "enterprise_id": "E111",
            "authorizations": [
                {
                    "enterprise_id": "E111",
                    "team_id": None,
                    "user_id": "UBOT9999",
                    "is_bot": True,
                    "is_enterprise_install": True,
                }
            ],
        }
        assert await s.event(body) == 200
        await until(lambda: any(p.text == "Hello, org." for p in s.fake.posts))
        await s.harness.settle()
        (post,) = s.fake.posts
        assert post.token == "xoxb-org-9999" and post.channel == "CT111"
        assert await redis.get("parley:slack-grid-team:T111") == b"E111"


async def test_an_install_from_a_workspace_off_the_allowlist_is_refused(redis) -> None:
    async with installable(redis, ScriptedModel([]), allowed=("T1ONE",)) as s:
        s.fake.install("code-x", team="T9OTHER", token="xoxb-other-3333")
        refused = await s.install("code-x")
        assert refused.status != 200 and "Something Went Wrong" in await refused.text()
        assert [k async for k in redis.scan_iter("parley:slack-install:*")] == []


async def test_a_state_is_good_once_and_a_forged_one_is_refused(redis) -> None:
    async with installable(redis, ScriptedModel([])) as s:
        s.fake.install("code-one", team="T1ONE", token="xoxb-one-1111")
        forged = await s.http.get(
            f"{s.base}/slack/oauth_redirect",
            params={"code": "code-one", "state": "made-up"},
            headers={"Cookie": "slack-app-oauth-state=made-up"},
        )
        assert forged.status == 401 and "Something Went Wrong" in await forged.text()
        assert [k async for k in redis.scan_iter("parley:slack-install:*")] == []


async def test_an_uninstall_reaches_the_token_a_worker_process_cached(redis) -> None:
    """The gateway and the workers are separate processes: a worker's cached token for a
    workspace (kept up to a minute) is forgotten at its next lookup once the gateway saw the
    app uninstalled there, or the token revoked; the other workspace's keeps serving."""
    async with installable(redis, ScriptedModel([])) as s:
        s.fake.install("code-one", team="T1ONE", token="xoxb-one-1111")
        s.fake.install("code-two", team="T2TWO", token="xoxb-two-2222")
        for code in ("code-one", "code-two"):
            assert (await s.install(code)).status == 200
        # a worker: its own adapter and store objects on the same Redis, sending only
        worker = SlackAdapter(
            config=SlackConfig(
                bot_token="",
                api_url=s.fake.api_url,
                client_id="111.222",
                client_secret="oauth-client-secret",
                public_url=PUBLIC,
            ),
            installations=RedisInstallations(redis, Keys(), secret_key=KEY),
        )
        one = ConversationKey(platform="slack", chat_id="CT1ONE", team_id="T1ONE")
        two = ConversationKey(platform="slack", chat_id="CT2TWO", team_id="T2TWO")
        try:
            await worker.send(one, OutboundMessage(text="before"))
            await worker.send(two, OutboundMessage(text="two, before"))
            uninstalled = fs.event_callback({"type": "app_uninstalled"}, team="T1ONE")
            assert await s.event(uninstalled) == 200
            assert await redis.get("parley:slack-install:team:T1ONE") is None
            with contextlib.suppress(DeliveryError):  # no token for T1ONE any more
                await worker.send(one, OutboundMessage(text="after"))
            await worker.send(two, OutboundMessage(text="two, after"))

            s.fake.revoke("xoxb-two-2222")  # then workspace two revokes its token
            revoked = fs.event_callback(
                {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UBOT2222"]}},
                team="T2TWO",
            )
            assert await s.event(revoked) == 200
            with contextlib.suppress(DeliveryError):
                await worker.send(two, OutboundMessage(text="two, revoked"))
        finally:
            await worker.stop()
    used = [
        (c.body.get("text"), c.headers.get("Authorization", ""))
        for c in s.fake.method_calls("chat.postMessage")
    ]
    assert used[:2] == [("before", "Bearer xoxb-one-1111"), ("two, before", "Bearer xoxb-two-2222")]
    after_one = [auth for text, auth in used if text == "after"]
    assert "Bearer xoxb-one-1111" not in after_one  # the uninstalled workspace's token: unused
    assert ("two, after", "Bearer xoxb-two-2222") in used  # the other workspace: served
    assert "Bearer xoxb-two-2222" not in [auth for text, auth in used if text == "two, revoked"]


async def test_an_installation_stored_by_the_release_before_is_still_found(redis) -> None:
    """Stored before the record codec: the SDK's dict through `json.dumps(default=str)`, its
    times as `str(datetime)`. Read back as it was; one saved now reads back the same."""
    store = RedisInstallations(redis, Keys(), secret_key=KEY)
    installation = Installation(
        app_id="A1",
        team_id="T3OLD",
        bot_token="xoxb-old-3333",
        bot_id="B3",
        bot_user_id="UBOT3333",
        bot_scopes=["chat:write"],
        bot_token_expires_at=2_000_000_000,
        user_id="UANA",
        installed_at=1_700_000_000.5,
    )
    old = json.dumps(installation.to_dict_for_copying(), default=str)
    assert '"installed_at": "2023-11-14 22:13:20.500000+00:00"' in old
    await redis.set("parley:slack-install:team:T3OLD", Fernet(KEY.encode()).encrypt(old.encode()))
    for _ in range(2):
        found = await store.async_find_installation(enterprise_id=None, team_id="T3OLD")
        assert found is not None
        assert (found.bot_token, found.bot_scopes, found.bot_user_id) == (
            "xoxb-old-3333",
            ["chat:write"],
            "UBOT3333",
        )
        assert (found.installed_at, found.bot_token_expires_at) == (1_700_000_000.5, 2_000_000_000)
        await store.async_save(found)  # the second pass reads what this release wrote
