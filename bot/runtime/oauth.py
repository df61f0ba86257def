"""MCP authorization, client side: discovery, registration, PKCE, code exchange, refresh.

The `mcp` SDK's `OAuthClientProvider` runs the whole flow inside one HTTP request and waits
in-process for the browser to come back; Parley's callback may arrive at another process
(or after a restart), so the flow is cut into steps whose state lives in Redis
(`connections.py`). The steps use the SDK's own discovery URL builders, metadata models,
registration request and PKCE parameters; only the glue is here.

Errors::

    OAuthError     the server's sign-in refused or answered nonsense; the message says which
    ConnectionError (builtin) the server or its authorization server could not be reached
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlencode

import httpx2
from mcp.client.auth import OAuthRegistrationError
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
)
from mcp.shared.auth import OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl, BaseModel, ValidationError

from agent.mcp import ServerConfig

TIMEOUT = 15.0  # seconds for one request to a server's sign-in
_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "ping"}


class OAuthError(Exception):
    """The authorization server refused, or answered something unusable."""


class Client(BaseModel):
    """How Parley talks to one server's authorization server (cached per server)."""

    resource: str
    authorization_endpoint: str
    token_endpoint: str
    client_id: str
    client_secret: str | None = None
    scope: str | None = None
    revocation_endpoint: str | None = None


class Tokens(BaseModel):
    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None  # epoch seconds
    scope: str | None = None

    @classmethod
    def of(cls, token: OAuthToken, now: float, previous: Tokens | None = None) -> Tokens:
        return cls(
            access_token=token.access_token,
            # a refresh that returns no new refresh token keeps the old one (RFC 6749 §6)
            refresh_token=token.refresh_token or (previous.refresh_token if previous else None),
            expires_at=now + token.expires_in if token.expires_in else None,
            scope=token.scope,
        )


@dataclass(frozen=True, kw_only=True)
class Authorization:
    url: str
    verifier: str


def http() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=TIMEOUT, follow_redirects=False)


async def register(server: ServerConfig, redirect_uri: str) -> Client:
    """Discover the server's authorization server and register Parley with it (or use the
    configured `client_id`)."""
    assert server.url is not None
    try:
        async with http() as client:
            probe = await client.post(
                server.url,
                json=_PROBE,
                headers={"Accept": "application/json, text/event-stream"},
            )
            hint = (
                extract_resource_metadata_from_www_auth(probe) if probe.status_code == 401 else None
            )
            resource = None
            for url in build_protected_resource_metadata_discovery_urls(hint, server.url):
                resource = await handle_protected_resource_response(
                    await client.send(create_oauth_metadata_request(url))
                )
                if resource is not None:
                    break
            issuer = str(resource.authorization_servers[0]) if resource else None
            metadata = None
            for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server.url):
                go_on, metadata = await handle_auth_metadata_response(
                    await client.send(create_oauth_metadata_request(url))
                )
                if metadata is not None or not go_on:
                    break
            if metadata is None:
                raise OAuthError("no authorization server metadata")
            if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
                raise OAuthError("the authorization server does not support PKCE S256")
            scope = server.scope or (
                " ".join(resource.scopes_supported)
                if resource and resource.scopes_supported
                else None
            )
            client_id, secret = server.client_id, server.client_secret
            if client_id is None:
                wanted = OAuthClientMetadata(
                    redirect_uris=[AnyUrl(redirect_uri)],
                    client_name="Parley",
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    token_endpoint_auth_method="none",
                    scope=scope,
                )
                request = create_client_registration_request(metadata, wanted, str(metadata.issuer))
                registered = await handle_registration_response(await client.send(request))
                client_id, secret = registered.client_id, registered.client_secret
            if client_id is None:
                raise OAuthError("the registration gave no client_id")
    except httpx2.TransportError as exc:
        raise ConnectionError(f"sign-in unreachable ({type(exc).__name__})") from None
    except (OAuthRegistrationError, ValidationError) as exc:
        raise OAuthError(f"registration refused: {str(exc)[:200]}") from None
    return Client(
        resource=str(resource.resource) if resource else server.url,
        authorization_endpoint=str(metadata.authorization_endpoint),
        token_endpoint=str(metadata.token_endpoint),
        client_id=client_id,
        client_secret=secret,
        scope=scope,
        revocation_endpoint=str(metadata.revocation_endpoint)
        if metadata.revocation_endpoint
        else None,
    )


def authorization(client: Client, redirect_uri: str, state: str) -> Authorization:
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
    if client.scope:
        params["scope"] = client.scope
    join = "&" if "?" in client.authorization_endpoint else "?"
    return Authorization(
        url=f"{client.authorization_endpoint}{join}{urlencode(params)}", verifier=pkce.code_verifier
    )


async def exchange(client: Client, code: str, verifier: str, redirect_uri: str) -> Tokens:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    return Tokens.of(await _token_request(client, form), time.time())


async def refresh(client: Client, tokens: Tokens) -> Tokens:
    if tokens.refresh_token is None:
        raise OAuthError("no refresh token")
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
    return Tokens.of(await _token_request(client, form), time.time(), tokens)


async def revoke(client: Client, tokens: Tokens) -> None:
    """Tell the server a token is no longer wanted (RFC 7009), where it has the endpoint:
    the refresh token (which ends the grant) or else the access token."""
    if client.revocation_endpoint is None:
        return
    token, hint = (
        (tokens.refresh_token, "refresh_token")
        if tokens.refresh_token
        else (tokens.access_token, "access_token")
    )
    form = {"token": token, "token_type_hint": hint, "client_id": client.client_id}
    if client.client_secret:
        form["client_secret"] = client.client_secret
    try:
        async with http() as session:
            response = await session.post(client.revocation_endpoint, data=form)
    except httpx2.TransportError as exc:
        raise ConnectionError(f"revocation endpoint unreachable ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise OAuthError(f"revocation refused ({response.status_code})")


async def _token_request(client: Client, form: dict[str, str]) -> OAuthToken:
    form = {**form, "client_id": client.client_id, "resource": client.resource}
    if client.client_secret:
        form["client_secret"] = client.client_secret
    try:
        async with http() as session:
            response = await session.post(client.token_endpoint, data=form)
    except httpx2.TransportError as exc:
        raise ConnectionError(f"token endpoint unreachable ({type(exc).__name__})") from None
    if response.status_code != 200:
        # the error code only: a body may echo what was sent
        try:
            error = str(response.json().get("error", ""))[:60]
        except ValueError:
            error = ""
        raise OAuthError(f"token request refused ({response.status_code} {error})".strip())
    try:
        return OAuthToken.model_validate_json(response.content)
    except ValidationError:
        raise OAuthError("the token response is not a token") from None
