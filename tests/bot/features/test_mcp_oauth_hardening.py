"""MCP authorization as 2026-07-28 hardens it, against the test authorization server
(tests/fakes/oauth_server.py) and a resource server that plays what a hostile or moving MCP
server answers (its 401, its protected-resource metadata).

Each test drives Parley's `Connections` the way a run and the callback do: a Connect link,
the browser's trip to the authorization server, the redirect handed to `finish`.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from cryptography.fernet import Fernet

from agent.mcp import ServerConfig
from agent.mcp.user import Refusal
from agent.protocols import RunContext
from agent.tools import ToolError
from bot.features.connections import oauth
from bot.features.connections.store import MAX_STEP_UPS, Connections
from bot.runtime.keys import Keys
from tests.fakes.oauth_server import OAuthServer, query_of
from tests.fakes.server import FakeServer, Recorded, json_response

pytestmark = pytest.mark.network

KEY = Fernet.generate_key().decode()
ANA = RunContext(conversation_id="telegram:-:42:-", platform="telegram", user_id="42", chat_id="42")


@dataclass
class ResourceServer(FakeServer):
    """What an MCP server says before it serves anyone: 401 with a challenge, and its
    protected-resource metadata (`metadata`, its own by default)."""

    name: str = "resource"
    issuer: str = ""
    scope: str | None = None
    metadata: dict[str, Any] | None = None
    hint: str | None = None  # the challenge's resource_metadata URL
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.add("POST", "/mcp", self._mcp)
        self.add("GET", "/.well-known/oauth-protected-resource/mcp", self._prm)

    async def _mcp(self, recorded: Recorded, request: web.Request) -> web.Response:
        challenge = f'Bearer resource_metadata="{self.hint or self.url + "/.well-known/oauth-protected-resource/mcp"}"'
        if self.scope:
            challenge += f', scope="{self.scope}"'
        return web.Response(status=401, headers={"WWW-Authenticate": challenge})

    async def _prm(self, recorded: Recorded, request: web.Request) -> web.Response:
        return json_response(
            self.metadata or {"resource": f"{self.url}/mcp", "authorization_servers": [self.issuer]}
        )


def connections(
    redis: aioredis.Redis,
    url: str,
    public_url: str = "http://127.0.0.1:9",
    *,
    trusted: str | None = None,
    idle: float = 90 * 86_400.0,
    **server: Any,
) -> Connections:
    """One per-user server, "tracker" at `url` (`server`: more of its entry)."""
    return Connections(
        redis,
        Keys(),
        servers={"tracker": ServerConfig(url=url, auth="user", **server)},
        secret_key=KEY,
        public_url=public_url,
        connect_ttl=600,
        trusted=trusted,
        idle=idle,
    )


@contextlib.asynccontextmanager
async def world(**auth: Any) -> AsyncIterator[tuple[OAuthServer, ResourceServer]]:
    async with OAuthServer(**auth) as server, ResourceServer() as resource:
        resource.issuer = server.url
        yield server, resource


async def sign_in(auth: OAuthServer, c: Connections, link: str) -> oauth.Tokens:
    """The browser's trip, then what /oauth/callback does with the redirect."""
    back = query_of(await auth.sign_in(link, login="ana"))
    state = back["state"]
    pending = await c.take_pending(state)
    assert pending is not None
    tokens = await c.finish(pending.server, pending.verifier, back)
    await c.store(pending.server, pending.platform, pending.user_id, tokens)
    return tokens


async def test_a_server_naming_another_resource_gets_no_sign_in(redis: aioredis.Redis) -> None:
    async with world() as (auth, resource):
        resource.metadata = {
            "resource": "https://mail.example.com/mcp",  # a token for the person's mail
            "authorization_servers": [auth.url],
        }
        c = connections(redis, f"{resource.url}/mcp")
        with pytest.raises(ToolError, match="not working"):
            await c.connect_link("tracker", ANA, "q1")
        assert not auth.calls("/register") and not auth.calls("/authorize")


async def test_metadata_naming_another_issuer_is_not_used(redis: aioredis.Redis) -> None:
    async with world(claimed_issuer="https://attacker.example.com") as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp")
        with pytest.raises(ToolError, match="not working"):
            await c.connect_link("tracker", ANA, "q1")
        assert not auth.calls("/register")


@pytest.mark.parametrize(
    ("iss", "accepted"),
    [("own", True), ("other", False), ("slash", False), ("missing", False)],
)
async def test_the_authorization_response_must_come_from_the_issuer(
    redis: aioredis.Redis, iss: str, accepted: bool
) -> None:
    async with world(iss=True) as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp")
        link = await c.connect_link("tracker", ANA, "q1")
        back = query_of(await auth.sign_in(link, login="ana"))
        back["iss"] = {
            "own": auth.url,
            "other": "https://evil.example",
            "slash": auth.url + "/",
        }.get(iss, "")
        if iss == "missing":
            del back["iss"]
        pending = await c.take_pending(back["state"])
        assert pending is not None
        if accepted:
            tokens = await c.finish("tracker", pending.verifier, back)
            assert tokens.access_token.startswith("at-ana-")
        else:
            with pytest.raises(oauth.OAuthError, match="another authorization server|without"):
                await c.finish("tracker", pending.verifier, back)
            assert not auth.calls("/token")  # the code never reached the token endpoint


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_the_token_endpoint_gets_the_method_the_server_supports(
    redis: aioredis.Redis, method: str
) -> None:
    async with world(auth_methods=[method]) as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp")
        tokens = await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        assert tokens.access_token
        (token_request,) = auth.calls("/token")
        basic = token_request.headers.get("Authorization", "")
        assert basic.startswith("Basic ") == (method == "client_secret_basic")
        assert ("client_secret" in token_request.body) == (method == "client_secret_post")


async def test_a_pre_registered_client_authenticates_with_basic(redis: aioredis.Redis) -> None:
    async with world(auth_methods=["client_secret_basic"]) as (auth, resource):
        auth.clients["parley"] = ["http://127.0.0.1:9/oauth/callback"]
        auth.secrets["parley"] = ("s3cret", "client_secret_basic")
        c = connections(redis, f"{resource.url}/mcp", client_id="parley", client_secret="s3cret")
        await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        assert not auth.calls("/register")
        (token_request,) = auth.calls("/token")
        expected = base64.b64encode(b"parley:s3cret").decode()
        assert token_request.headers["Authorization"] == f"Basic {expected}"


async def test_scopes_come_from_the_challenge(redis: aioredis.Redis) -> None:
    async with world() as (auth, resource):
        resource.scope = "tickets:read"
        c = connections(redis, f"{resource.url}/mcp")
        link = await c.connect_link("tracker", ANA, "q1")
        assert query_of(link)["scope"] == "tickets:read"


async def test_step_up_asks_for_the_union_and_is_bounded(redis: aioredis.Redis) -> None:
    async with world() as (auth, resource):
        resource.scope = "tickets:read"
        c = connections(redis, f"{resource.url}/mcp")
        await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        wants = 'Bearer error="insufficient_scope", scope="tickets:write"'
        refusal = Refusal(status=403, www_authenticate=wants)
        link = await c.connect_link("tracker", ANA, "q2", refusal)
        assert set(query_of(link)["scope"].split()) == {"tickets:read", "tickets:write"}
        for n in range(MAX_STEP_UPS - 1):
            await c.connect_link("tracker", ANA, f"q{n + 3}", refusal)
        with pytest.raises(ToolError, match="keeps asking"):
            await c.connect_link("tracker", ANA, "q9", refusal)


async def test_a_step_up_for_scope_already_granted_is_refused(redis: aioredis.Redis) -> None:
    async with world() as (auth, resource):
        resource.scope = "tickets:write"
        c = connections(redis, f"{resource.url}/mcp")
        await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        refusal = Refusal(
            status=403, www_authenticate='Bearer error="insufficient_scope", scope="tickets:write"'
        )
        with pytest.raises(ToolError, match="refuses the access it was granted"):
            await c.connect_link("tracker", ANA, "q2", refusal)


async def test_registrations_belong_to_their_issuer_and_follow_a_move(
    redis: aioredis.Redis,
) -> None:
    async with world() as (first, resource), OAuthServer() as second:
        c = connections(redis, f"{resource.url}/mcp")
        await sign_in(first, c, await c.connect_link("tracker", ANA, "q1"))
        await c.connect_link("tracker", ANA, "q2")
        assert len(first.calls("/register")) == 1  # kept for its issuer
        resource.issuer = second.url  # the server moved
        refusal = Refusal(status=401, www_authenticate="Bearer")
        link = await c.connect_link("tracker", ANA, "q3", refusal)
        assert link.startswith(second.url) and len(second.calls("/register")) == 1
        tokens = await sign_in(second, c, link)
        assert tokens.access_token in second.access
        assert await c.token("tracker", ANA) == tokens.access_token


async def test_client_id_metadata_document_when_the_server_accepts_it(
    redis: aioredis.Redis,
) -> None:
    async with world(cimd=True) as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp", public_url="https://parley.example")
        link = await c.connect_link("tracker", ANA, "q1")
        assert query_of(link)["client_id"] == "https://parley.example/client-metadata.json"
        assert not auth.calls("/register")
        document = json.loads(c.client_metadata())
        assert document["client_id"] == "https://parley.example/client-metadata.json"
        assert document["redirect_uris"] == ["https://parley.example/oauth/callback"]


async def test_dynamic_registration_is_the_fallback_and_names_the_application_type(
    redis: aioredis.Redis,
) -> None:
    async with world(cimd=False) as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp", public_url="https://parley.example")
        await c.connect_link("tracker", ANA, "q1")
        (registration,) = auth.calls("/register")
        assert registration.body["application_type"] == "web"


async def test_a_server_error_on_refresh_keeps_the_tokens(redis: aioredis.Redis) -> None:
    async with world(expires_in=60) as (auth, resource):  # inside the early-refresh window
        c = connections(redis, f"{resource.url}/mcp")
        tokens = await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        auth.token_status = 503
        assert await c.token("tracker", ANA) == tokens.access_token  # still valid: used
        assert await c.connected("telegram", "42") == ["tracker"]
        auth.token_status = None
        fresh = await c.token("tracker", ANA)
        assert fresh != tokens.access_token and fresh in auth.access


async def test_a_revoked_grant_forgets_and_revokes_the_tokens(redis: aioredis.Redis) -> None:
    async with world(expires_in=60) as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp")
        tokens = await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        auth.revoke_refresh_tokens()
        assert await c.token("tracker", ANA) is None
        assert await c.connected("telegram", "42") == []
        (revocation,) = auth.calls("/revoke")
        assert revocation.body["token"] in (tokens.refresh_token, tokens.access_token)


@pytest.mark.parametrize("named", ["hint", "authorization_server", "token_endpoint"])
async def test_a_hostile_server_cannot_make_parley_reach_internal_addresses(
    redis: aioredis.Redis, named: str
) -> None:
    """`localhost` is another name for the loopback the test servers share: not the host
    the operator configured (127.0.0.1), so nothing may reach the service listening there."""
    async with world() as (auth, resource), FakeServer(name="internal") as internal:
        inside = f"http://localhost:{internal.port}"
        if named == "hint":
            resource.hint = f"{inside}/prm"
        elif named == "authorization_server":
            resource.metadata = {
                "resource": f"{resource.url}/mcp",
                "authorization_servers": [inside],
            }
        c = connections(redis, f"{resource.url}/mcp")
        if named == "token_endpoint":
            link = await c.connect_link("tracker", ANA, "q1")
            kept = await c.client("tracker")
            await c._keep_client("tracker", kept.model_copy(update={"token_endpoint": inside}))
            back = query_of(await auth.sign_in(link, login="ana"))
            pending = await c.take_pending(back["state"])
            assert pending is not None
            with pytest.raises(oauth.OAuthError, match="refused"):
                await c.finish("tracker", pending.verifier, back)
        else:
            with pytest.raises(ToolError, match="not working"):
                await c.connect_link("tracker", ANA, "q1")
        assert internal.requests == []


async def test_trusted_hosts_let_an_operator_use_an_internal_authorization_server(
    redis: aioredis.Redis,
) -> None:
    async with OAuthServer() as auth, ResourceServer() as resource:
        resource.issuer = auth.url.replace("127.0.0.1", "localhost")
        c = connections(redis, f"{resource.url}/mcp", trusted="localhost")  # PARLEY_TRUSTED_HOSTS
        auth.claimed_issuer = resource.issuer
        link = await c.connect_link("tracker", ANA, "q1")
        assert link.startswith(f"{auth.url}/authorize") and auth.calls("/register")


async def test_the_key_rotates_without_losing_anyones_connection(redis: aioredis.Redis) -> None:
    async with world() as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp")
        tokens = await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        new = Fernet.generate_key().decode()
        url = f"{resource.url}/mcp"
        both = Connections(
            redis,
            Keys(),
            servers=c.servers,
            secret_key=f"{new},{KEY}",
            public_url=url,
            connect_ttl=1,
        )
        assert await both.token("tracker", ANA) == tokens.access_token  # the old key still opens
        done, unreadable = await both.rekey()
        assert done >= 3 and unreadable == 0  # token, server's client, registration
        only_new = Connections(
            redis, Keys(), servers=c.servers, secret_key=new, public_url=url, connect_ttl=1
        )
        assert await only_new.token("tracker", ANA) == tokens.access_token
        assert await c.token("tracker", ANA) is None  # the retired key opens nothing now


async def test_removing_a_person_revokes_and_forgets_their_accounts(
    redis: aioredis.Redis,
) -> None:
    async with world() as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp")
        tokens = await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        assert await c.remove_person("telegram", "42") == ["tracker"]
        assert tokens.access_token not in auth.access  # the grant ended at the server
        assert await c.connected("telegram", "42") == []


async def test_a_connection_nobody_uses_expires(redis: aioredis.Redis) -> None:
    async with world() as (auth, resource):
        c = connections(redis, f"{resource.url}/mcp", idle=1000)
        await sign_in(auth, c, await c.connect_link("tracker", ANA, "q1"))
        key = Keys().oauth_token("tracker", "telegram", "42")
        assert 0 < await redis.ttl(key) <= 1000
        await redis.expire(key, 10)
        assert await c.token("tracker", ANA)  # a use keeps it another idle period
        assert await redis.ttl(key) > 10
