"""MCP authorization, client side: the sign-in cut into steps (PKCE, code exchange, refresh,
revocation) whose state lives in Redis (`connections.py`).

The `mcp` SDK's `OAuthClientProvider` runs the whole flow inside one HTTP request and waits
in-process for the browser to come back; Parley's callback may arrive at another process
(or after a restart), so the flow is cut into steps. Discovery and registration are
`discovery.py`; the steps use the SDK's own validators, metadata models and PKCE
parameters; only the glue is here. Every request goes through the outbound guard.

Errors::

    OAuthError     the server's sign-in refused or answered nonsense; the message says which
                   (`code` "invalid_grant": the grant is gone, the tokens are worthless)
    ConnectionError (builtin) the server or its authorization server could not be reached,
                   or answered with a server error: try again later
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import validate_authorization_response_iss
from mcp.shared.auth import OAuthMetadata, OAuthToken
from pydantic import BaseModel, ValidationError

from agent.outbound import SECONDS, AddressRefused, Guard
from bot.features.connections.discovery import (
    AuthMethod,
    Challenge,
    Discovery,
    OAuthError,
    Registration,
    client_metadata,
    discover,
    register,
)

__all__ = [
    "TIMEOUT",
    "Authorization",
    "Challenge",
    "Client",
    "OAuthError",
    "Registration",
    "Tokens",
    "authorization",
    "check_response",
    "client_for",
    "client_metadata",
    "discover",
    "exchange",
    "refresh",
    "register",
    "revoke",
]

TIMEOUT = SECONDS  # seconds for one request to a server's sign-in


class Client(BaseModel):
    """How Parley talks to one server's authorization server (cached per server)."""

    resource: str
    issuer: str = ""
    authorization_endpoint: str
    token_endpoint: str
    client_id: str
    client_secret: str | None = None
    auth_method: AuthMethod = "none"
    scope: str | None = None
    revocation_endpoint: str | None = None
    iss_supported: bool = False  # the server promised `iss` on its redirect (RFC 9207)


def client_for(found: Discovery, registration: Registration) -> Client:
    metadata = found.metadata
    return Client(
        resource=found.resource,
        issuer=found.issuer,
        authorization_endpoint=str(metadata.authorization_endpoint),
        token_endpoint=str(metadata.token_endpoint),
        client_id=registration.client_id,
        client_secret=registration.client_secret,
        auth_method=registration.auth_method,
        scope=found.scope,
        revocation_endpoint=str(metadata.revocation_endpoint)
        if metadata.revocation_endpoint
        else None,
        iss_supported=bool(metadata.authorization_response_iss_parameter_supported),
    )


class Tokens(BaseModel):
    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None  # epoch seconds
    scope: str | None = None

    @classmethod
    def of(
        cls, token: OAuthToken, now: float, previous: Tokens | None = None, asked: str | None = None
    ) -> Tokens:
        return cls(
            access_token=token.access_token,
            # a refresh that returns no new refresh token keeps the old one (RFC 6749 §6)
            refresh_token=token.refresh_token or (previous.refresh_token if previous else None),
            expires_at=now + token.expires_in if token.expires_in else None,
            # no scope in the answer: what was asked for (or held before) was granted (§5.1)
            scope=token.scope or asked or (previous.scope if previous else None),
        )


@dataclass(frozen=True, kw_only=True)
class Authorization:
    url: str
    verifier: str


def authorization(
    client: Client, redirect_uri: str, state: str, scope: str | None
) -> Authorization:
    pkce = PKCEParameters.generate()
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
        "resource": client.resource,  # RFC 8707: the token is for this server only
    }
    if scope:
        params["scope"] = scope
        if "offline_access" in scope.split():
            params["prompt"] = "consent"  # OIDC asks for it with offline_access
    join = "&" if "?" in client.authorization_endpoint else "?"
    return Authorization(
        url=f"{client.authorization_endpoint}{join}{urlencode(params)}", verifier=pkce.code_verifier
    )


def check_response(client: Client, query: Mapping[str, str]) -> str:
    """The code of an authorization response that came from the server it was sent to
    (RFC 9207 `iss`, compared as a string); OAuthError otherwise."""
    expected = OAuthMetadata.model_construct(
        issuer=client.issuer,
        authorization_response_iss_parameter_supported=client.iss_supported,
    )
    try:
        validate_authorization_response_iss(query.get("iss"), expected)
    except OAuthFlowError:
        raise OAuthError("the sign-in came back from another authorization server") from None
    code = query.get("code")
    if not code:
        raise OAuthError("the sign-in came back without a code")
    return code


async def exchange(
    client: Client, code: str, verifier: str, redirect_uri: str, guard: Guard
) -> Tokens:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    token = await _token_request(client, form, guard)
    return Tokens.of(token, time.time(), asked=client.scope)


async def refresh(client: Client, tokens: Tokens, guard: Guard) -> Tokens:
    if tokens.refresh_token is None:
        raise OAuthError("no refresh token", code="invalid_grant")
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
    return Tokens.of(await _token_request(client, form, guard), time.time(), tokens)


async def revoke(client: Client, tokens: Tokens, guard: Guard) -> None:
    """Tell the server a token is no longer wanted (RFC 7009), where it has the endpoint:
    the refresh token (which ends the grant) or else the access token."""
    if client.revocation_endpoint is None:
        return
    token, hint = (
        (tokens.refresh_token, "refresh_token")
        if tokens.refresh_token
        else (tokens.access_token, "access_token")
    )
    form = {"token": token, "token_type_hint": hint}
    response = await _post(client, client.revocation_endpoint, form, guard, "revocation")
    if response.status_code != 200:
        raise OAuthError(f"revocation refused ({response.status_code})")


def _authenticated(client: Client, form: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The form and headers that authenticate Parley the way its registration says."""
    form = {**form, "client_id": client.client_id}
    if client.client_secret and client.auth_method == "client_secret_basic":
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        return form, {"Authorization": f"Basic {base64.b64encode(pair.encode()).decode()}"}
    if client.client_secret and client.auth_method == "client_secret_post":
        form["client_secret"] = client.client_secret
    return form, {}


async def _post(
    client: Client, url: str, form: dict[str, str], guard: Guard, endpoint: str
) -> httpx2.Response:
    """`form` posted to one of the server's `endpoint`s as Parley's registration says:
    unreachable is a ConnectionError (tried again later), a refused address an OAuthError."""
    form, headers = _authenticated(client, form)
    try:
        async with guard.client() as session:
            return await session.post(url, data=form, headers=headers)
    except httpx2.TransportError as exc:
        raise ConnectionError(f"{endpoint} endpoint unreachable ({type(exc).__name__})") from None
    except AddressRefused as exc:
        raise OAuthError(f"{endpoint} endpoint refused: {exc}") from None


async def _token_request(client: Client, form: dict[str, str], guard: Guard) -> OAuthToken:
    form = {**form, "resource": client.resource}
    response = await _post(client, client.token_endpoint, form, guard, "token")
    if response.status_code != 200:
        # the error code only: a body may echo what was sent
        try:
            error = str(response.json().get("error", ""))[:60]
        except (ValueError, AttributeError):
            error = ""
        if response.status_code >= 500 or response.status_code == 429:
            raise ConnectionError(f"token endpoint unavailable ({response.status_code})")
        raise OAuthError(f"token request refused ({response.status_code} {error})".strip(), error)
    try:
        return OAuthToken.model_validate_json(response.content)
    except ValidationError:
        raise OAuthError("the token response is not a token") from None
