"""Finding a per-user MCP server's authorization server, and the client Parley is there.

Discovery follows the server's 401 (`WWW-Authenticate`: `resource_metadata`, `scope`) to its
protected-resource metadata, then the authorization server's metadata, with the checks of
MCP 2026-07-28 (the `mcp` SDK's validators): the metadata's `resource` must be the server
Parley talks to (a token for another service is never asked for), and the authorization
server's metadata must name the issuer it was discovered from. Every address here is named by
a third party, so every request goes through the outbound guard (`agent/outbound.py`).

The client is, in this order: the operator's pre-registered `client_id`; Parley's Client ID
Metadata Document (`<PARLEY_PUBLIC_URL>/client-metadata.json`) where the authorization server
accepts one; else dynamic registration. A registration belongs to its issuer
(`Registration.issuer`), so a server that moves to another authorization server gets a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError
from mcp.client.auth.oauth2 import check_registration_usable
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_field_from_www_auth,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    is_valid_client_metadata_url,
    issuers_match,
    validate_metadata_issuer,
)
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from pydantic import AnyUrl, BaseModel, ValidationError

from agent.mcp import ServerConfig
from agent.outbound import AddressRefused, Guard

AuthMethod = Literal["none", "client_secret_post", "client_secret_basic"]
GRANTS = ["authorization_code", "refresh_token"]
_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "ping"}


class OAuthError(Exception):
    """The authorization server refused, or answered something unusable. `code` is the
    OAuth error code when there was one (`invalid_grant`: the grant is gone)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, kw_only=True)
class Challenge:
    """What a server's 401 or 403 said (`WWW-Authenticate`)."""

    status: int
    scope: str | None = None
    resource_metadata: str | None = None
    error: str | None = None

    @classmethod
    def of(cls, response: httpx2.Response) -> Challenge | None:
        if response.status_code not in (401, 403):
            return None
        return cls(
            status=response.status_code,
            scope=extract_scope_from_www_auth(response),
            resource_metadata=extract_resource_metadata_from_www_auth(response),
            error=extract_field_from_www_auth(response, "error"),
        )

    @property
    def insufficient_scope(self) -> bool:
        return self.status == 403 and self.error == "insufficient_scope"


class Registration(BaseModel):
    """Parley as a client of one authorization server (cached per issuer)."""

    issuer: str
    client_id: str
    client_secret: str | None = None
    auth_method: AuthMethod = "none"


@dataclass(frozen=True, kw_only=True)
class Discovery:
    resource: str  # what tokens are asked for (RFC 8707)
    issuer: str
    metadata: OAuthMetadata
    scope: str | None


async def discover(
    server: ServerConfig, guard: Guard, challenge: Challenge | None = None
) -> Discovery:
    """The server's authorization server, checked; `challenge` is a 401/403 a call got."""
    assert server.url is not None
    try:
        async with guard.client() as client:
            if challenge is None:
                probe = await client.post(
                    server.url,
                    json=_PROBE,
                    headers={"Accept": "application/json, text/event-stream"},
                )
                challenge = Challenge.of(probe)
            hint = challenge.resource_metadata if challenge else None
            resource = await _protected_resource(client, server.url, hint)
            if resource is not None and resource.resource is not None:
                named = str(resource.resource)
                if not check_resource_allowed(resource_url_from_server_url(server.url), named):
                    raise OAuthError(f"the server's metadata names another resource ({named})")
            issuer = str(resource.authorization_servers[0]) if resource else None
            metadata = await _authorization_server(client, server.url, issuer)
    except httpx2.TransportError as exc:
        raise ConnectionError(f"sign-in unreachable ({type(exc).__name__})") from None
    except AddressRefused as exc:
        raise OAuthError(f"the server named an address Parley does not reach: {exc}") from None
    if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
        raise OAuthError("the authorization server does not support PKCE S256")
    scope = server.scope or get_client_metadata_scopes(
        challenge.scope if challenge else None, resource, metadata, GRANTS
    )
    return Discovery(
        resource=str(resource.resource)
        if resource and resource.resource
        else resource_url_from_server_url(server.url),
        issuer=str(metadata.issuer),
        metadata=metadata,
        scope=scope,
    )


async def _protected_resource(
    client: httpx2.AsyncClient, url: str, hint: str | None
) -> ProtectedResourceMetadata | None:
    failed: int | None = None
    for where in build_protected_resource_metadata_discovery_urls(hint, url):
        answer = await client.send(create_oauth_metadata_request(where))
        if answer.status_code >= 500 or answer.status_code == 429:
            failed = answer.status_code
        found = await handle_protected_resource_response(answer)
        if found is not None:
            return found
    if failed is not None:  # says nothing about whether the server publishes metadata
        raise ConnectionError(f"protected resource metadata unavailable (HTTP {failed})")
    return None


async def _authorization_server(
    client: httpx2.AsyncClient, url: str, issuer: str | None
) -> OAuthMetadata:
    # without protected-resource metadata (2025-03-26 servers) the issuer is the server's origin
    parts = urlsplit(url)
    expected = issuer or f"{parts.scheme}://{parts.netloc}"
    for where in build_oauth_authorization_server_metadata_discovery_urls(issuer, url):
        go_on, metadata = await handle_auth_metadata_response(
            await client.send(create_oauth_metadata_request(where))
        )
        if metadata is not None:
            named = str(metadata.issuer)
            if issuer is None and issuers_match(named, expected):
                expected = named
            try:
                validate_metadata_issuer(metadata, expected)
            except OAuthFlowError:
                raise OAuthError(
                    f"the authorization server's metadata names another issuer ({named})"
                ) from None
            return metadata
        if not go_on:
            break
    raise OAuthError("no authorization server metadata")


async def register(
    server: ServerConfig,
    found: Discovery,
    guard: Guard,
    redirect_uri: str,
    metadata_url: str | None,
) -> Registration:
    """Parley's client at the discovered authorization server (not cached here)."""
    supported = found.metadata.token_endpoint_auth_methods_supported
    if server.client_id is not None:  # pre-registered by the operator
        return Registration(
            issuer=found.issuer,
            client_id=server.client_id,
            client_secret=server.client_secret,
            auth_method=_secret_method(supported) if server.client_secret else "none",
        )
    if (
        found.metadata.client_id_metadata_document_supported
        and is_valid_client_metadata_url(metadata_url)
        and metadata_url is not None
    ):
        return Registration(issuer=found.issuer, client_id=metadata_url)
    if found.metadata.registration_endpoint is None:
        raise OAuthError("the authorization server offers no registration; configure client_id")
    public = supported is None or "none" in supported
    wanted = client_metadata(redirect_uri, found.scope)
    wanted.token_endpoint_auth_method = "none" if public else _secret_method(supported)
    request = create_client_registration_request(found.metadata, wanted, found.issuer)
    try:
        async with guard.client() as client:
            registered = await handle_registration_response(await client.send(request))
        check_registration_usable(registered)
    except httpx2.TransportError as exc:
        raise ConnectionError(f"registration unreachable ({type(exc).__name__})") from None
    except AddressRefused as exc:
        raise OAuthError(f"the server named an address Parley does not reach: {exc}") from None
    except (OAuthRegistrationError, ValidationError) as exc:
        raise OAuthError(f"registration refused: {str(exc)[:200]}") from None
    method = registered.token_endpoint_auth_method or wanted.token_endpoint_auth_method
    if method == "private_key_jwt":
        raise OAuthError("the authorization server registered a client Parley cannot use")
    return Registration(
        issuer=found.issuer,
        client_id=registered.client_id,
        client_secret=registered.client_secret,
        auth_method=cast(AuthMethod, method),
    )


def client_metadata(redirect_uri: str, scope: str | None = None) -> OAuthClientMetadata:
    """Parley as an OAuth client: what dynamic registration sends and the Client ID
    Metadata Document says (a confidential web application, PKCE, refresh tokens)."""
    return OAuthClientMetadata(
        redirect_uris=[AnyUrl(redirect_uri)],
        client_name="Parley",
        grant_types=GRANTS,
        response_types=["code"],
        token_endpoint_auth_method="none",
        application_type="web",
        scope=scope,
    )


def _secret_method(supported: list[str] | None) -> AuthMethod:
    """RFC 8414: without a list, client_secret_basic is what the server supports."""
    if supported is None or "client_secret_basic" in supported:
        return "client_secret_basic"
    if "client_secret_post" in supported:
        return "client_secret_post"
    raise OAuthError("the authorization server supports no client secret method Parley has")
