"""A small OAuth 2.1 authorization server, enough for MCP authorization, for tests.

    async with OAuthServer() as auth:
        url = await auth.sign_in(connect_link, login="alice")  # the browser's part
        # GET url (Parley's /oauth/callback?code=…&state=…)

Metadata (RFC 8414), dynamic client registration (RFC 7591), `/authorize` with PKCE S256
only (the person is named by `login`, standing in for a login form: it answers at once with
the redirect), `/token` for `authorization_code` (checks the verifier, the client and the
redirect URI) and `refresh_token` (rotating), `/introspect` (RFC 7662) for the MCP server,
and `/revoke` (RFC 7009). `expires_in` sets the lifetime of the access tokens it issues;
`revoke_refresh_tokens()` makes every refresh token unusable.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import aiohttp
from aiohttp import web

from tests.fakes.server import FakeServer, Recorded, json_response


@dataclass
class Grant:
    login: str
    client_id: str
    resource: str | None
    expires_at: float


@dataclass
class OAuthServer(FakeServer):
    name: str = "oauth"
    expires_in: int = 3600
    clients: dict[str, list[str]] = field(default_factory=dict)  # client_id → redirect URIs
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    access: dict[str, Grant] = field(default_factory=dict)
    refresh: dict[str, Grant] = field(default_factory=dict)
    issued: list[tuple[str, str]] = field(default_factory=list)  # (grant type, login)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self.add("GET", "/.well-known/oauth-authorization-server", self._metadata)
        self.add("POST", "/register", self._register)
        self.add("GET", "/authorize", self._authorize)
        self.add("POST", "/token", self._token)
        self.add("POST", "/introspect", self._introspect)
        self.add("POST", "/revoke", self._revoke)

    def revoke_refresh_tokens(self) -> None:
        self.refresh.clear()

    async def sign_in(self, link: str, login: str) -> str:
        """What a browser does with the Connect link: the redirect back to Parley."""
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{link}&login={login}", allow_redirects=False) as answer,
        ):
            assert answer.status == 302, await answer.text()
            return answer.headers["Location"]

    async def _metadata(self, recorded: Recorded, request: web.Request) -> web.Response:
        return json_response(
            {
                "issuer": self.url,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "registration_endpoint": f"{self.url}/register",
                "introspection_endpoint": f"{self.url}/introspect",
                "revocation_endpoint": f"{self.url}/revoke",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            }
        )

    async def _register(self, recorded: Recorded, request: web.Request) -> web.Response:
        body = recorded.body
        client_id = f"client-{next(self._ids)}"
        self.clients[client_id] = list(body["redirect_uris"])
        return json_response({**body, "client_id": client_id}, status=201)

    async def _authorize(self, recorded: Recorded, request: web.Request) -> web.Response:
        q = recorded.query
        redirect = q.get("redirect_uri", "")
        if q.get("client_id") not in self.clients or redirect not in self.clients[q["client_id"]]:
            return json_response({"error": "invalid_client"}, status=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return json_response({"error": "invalid_request"}, status=400)
        code = f"code-{next(self._ids)}"
        self.codes[code] = {**q}
        target = f"{redirect}?{urlencode({'code': code, 'state': q.get('state', '')})}"
        raise web.HTTPFound(target)

    async def _token(self, recorded: Recorded, request: web.Request) -> web.Response:
        form = recorded.body or {}
        kind = form.get("grant_type")
        if kind == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            if asked is None or asked["client_id"] != form.get("client_id"):
                return json_response({"error": "invalid_grant"}, status=400)
            if asked["redirect_uri"] != form.get("redirect_uri"):
                return json_response({"error": "invalid_grant"}, status=400)
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).decode().rstrip("=") != asked["code_challenge"]:
                return json_response({"error": "invalid_grant"}, status=400)
            login, resource = asked["login"], asked.get("resource")
        elif kind == "refresh_token":
            grant = self.refresh.pop(form.get("refresh_token", ""), None)
            if grant is None or grant.client_id != form.get("client_id"):
                return json_response({"error": "invalid_grant"}, status=400)
            login, resource = grant.login, grant.resource
        else:
            return json_response({"error": "unsupported_grant_type"}, status=400)
        n = next(self._ids)
        access, refresh = f"at-{login}-{n}", f"rt-{login}-{n}"
        grant = Grant(
            login=login,
            client_id=form["client_id"],
            resource=resource,
            expires_at=time.time() + self.expires_in,
        )
        self.access[access] = grant
        self.refresh[refresh] = grant
        self.issued.append((kind, login))
        return json_response(
            {
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": self.expires_in,
                "refresh_token": refresh,
            }
        )

    async def _revoke(self, recorded: Recorded, request: web.Request) -> web.Response:
        """RFC 7009: revoking a refresh token ends its grant, access tokens included."""
        token = (recorded.body or {}).get("token", "")
        grant = self.refresh.pop(token, None) or self.access.pop(token, None)
        if grant is not None:
            for table in (self.access, self.refresh):
                for key in [k for k, g in table.items() if g is grant]:
                    del table[key]
        return web.Response(status=200)

    async def _introspect(self, recorded: Recorded, request: web.Request) -> web.Response:
        token = (recorded.body or {}).get("token", "")
        grant = self.access.get(token)
        if grant is None or grant.expires_at < time.time():
            return json_response({"active": False})
        return json_response(
            {
                "active": True,
                "sub": grant.login,
                "client_id": grant.client_id,
                "scope": "",
                "exp": int(grant.expires_at),
                "aud": grant.resource,
            }
        )


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
