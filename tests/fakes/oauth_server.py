"""A small OAuth 2.1 authorization server, enough for MCP authorization, for tests.

    async with OAuthServer() as auth:
        url = await auth.sign_in(connect_link, login="alice")  # the browser's part
        # GET url (Parley's /oauth/callback?code=…&state=…)

Metadata (RFC 8414), dynamic client registration (RFC 7591), `/authorize` with PKCE S256
only (the person is named by `login`, standing in for a login form: it answers at once with
the redirect), `/token` for `authorization_code` (checks the verifier, the client and the
redirect URI) and `refresh_token` (rotating), `/introspect` (RFC 7662) for the MCP server,
and `/revoke` (RFC 7009). `expires_in` sets the lifetime of the access tokens it issues;
`revoke_refresh_tokens()` makes every refresh token unusable. `auth_methods` are the token
endpoint authentication methods it supports (a client registered for a secret method gets a
secret, and the token endpoint wants it that way, nothing else); `iss` adds RFC 9207's `iss`
to the redirect (and says so in the metadata); `cimd` accepts an https URL as client_id
(Client ID Metadata Documents); `claimed_issuer` is the issuer its metadata names (its own
URL by default); `token_status` makes the token endpoint answer that status instead.
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
    auth_methods: list[str] = field(default_factory=lambda: ["none"])
    secrets: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (secret, method)
    iss: bool = False
    cimd: bool = False
    claimed_issuer: str | None = None
    token_status: int | None = None

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
                "issuer": self.claimed_issuer or self.url,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "registration_endpoint": f"{self.url}/register",
                "introspection_endpoint": f"{self.url}/introspect",
                "revocation_endpoint": f"{self.url}/revoke",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": self.auth_methods,
                "authorization_response_iss_parameter_supported": self.iss,
                "client_id_metadata_document_supported": self.cimd,
            }
        )

    async def _register(self, recorded: Recorded, request: web.Request) -> web.Response:
        body = recorded.body
        client_id = f"client-{next(self._ids)}"
        self.clients[client_id] = list(body["redirect_uris"])
        method = body.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in self.auth_methods:
            return json_response({"error": "invalid_client_metadata"}, status=400)
        answer = {**body, "client_id": client_id, "token_endpoint_auth_method": method}
        if method != "none":
            answer["client_secret"] = secret = f"secret-{client_id}"
            self.secrets[client_id] = (secret, method)
        return json_response(answer, status=201)

    async def _authorize(self, recorded: Recorded, request: web.Request) -> web.Response:
        q = recorded.query
        redirect = q.get("redirect_uri", "")
        client_id = q.get("client_id", "")
        if self.cimd and client_id.startswith("https://"):  # a metadata document's URL
            self.clients.setdefault(client_id, [redirect])
        if client_id not in self.clients or redirect not in self.clients[client_id]:
            return json_response({"error": "invalid_client"}, status=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return json_response({"error": "invalid_request"}, status=400)
        code = f"code-{next(self._ids)}"
        self.codes[code] = {**q}
        back = {"code": code, "state": q.get("state", "")}
        if self.iss:
            back["iss"] = self.claimed_issuer or self.url
        target = f"{redirect}?{urlencode(back)}"
        raise web.HTTPFound(target)

    async def _token(self, recorded: Recorded, request: web.Request) -> web.Response:
        form = dict(recorded.body or {})
        if self.token_status is not None:
            return json_response({"error": "temporarily_unavailable"}, status=self.token_status)
        if not self._authenticated(recorded, form):
            return json_response({"error": "invalid_client"}, status=401)
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

    def _authenticated(self, recorded: Recorded, form: dict[str, str]) -> bool:
        """A client with a secret authenticates the way it registered, and only that way."""
        basic = recorded.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            form.setdefault("client_id", client_id)
            return self.secrets.get(client_id) == (secret, "client_secret_basic")
        kept = self.secrets.get(form.get("client_id", ""))
        if kept is None:
            return "client_secret" not in form
        return kept == (form.get("client_secret"), "client_secret_post")

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
