"""A real MCP server (the `mcp` SDK, Streamable HTTP) that wants each caller's own token.

    python -m tests.fakes.mcp_oauth_server PORT ISSUER_URL

The SDK's resource-server helpers do the protocol: `/.well-known/oauth-protected-resource/mcp`
names the authorization server, a request without a valid token gets 401 with
`WWW-Authenticate: Bearer resource_metadata=…`, and tokens are checked by introspection at
ISSUER_URL (tests/fakes/oauth_server.py). `whoami` (read-only) and `file_ticket` (no
annotations: side-effecting) answer as the token's owner; with `MCP_LEDGER` set, every tool
call appends "<tool> <owner> <access token>" there, so a test sees whose token each call carried.
"""

from __future__ import annotations

import os
import sys

import httpx2
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


class Introspection:
    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx2.AsyncClient() as client:
            answer = await client.post(f"{self.issuer}/introspect", data={"token": token})
        data = answer.json()
        if not data.get("active"):
            return None
        return AccessToken(
            token=token,
            client_id=data["client_id"],
            scopes=[],
            expires_at=data.get("exp"),
            resource=data.get("aud") or self.resource,
            subject=data["sub"],
        )


def _who(tool: str) -> str:
    token = get_access_token()
    assert token is not None
    if path := os.environ.get("MCP_LEDGER"):
        with open(path, "a", encoding="utf-8") as file:
            file.write(f"{tool} {token.subject} {token.token}\n")
    return str(token.subject)


def build(port: int, issuer: str) -> MCPServer:
    resource = f"http://127.0.0.1:{port}/mcp"
    server = MCPServer(
        "parley-oauth-test",
        token_verifier=Introspection(issuer, resource),
        auth=AuthSettings(
            issuer_url=issuer, resource_server_url=resource, validate_token_resource=True
        ),
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """Who the caller is, as this server sees them."""
        return f"you are {_who('whoami')}"

    @server.tool()
    def file_ticket(title: str) -> str:
        """File a ticket in the caller's name."""
        return f"ticket {title!r} filed by {_who('file_ticket')}"

    return server


def main() -> None:
    port, issuer = int(sys.argv[1]), sys.argv[2]
    import uvicorn

    app = build(port, issuer).streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
