"""`GET /oauth/callback` on the public listener: where a person's sign-in comes back.

The state must name a pending sign-in (`connections.Pending`), which is taken as it is read:
a forged, expired or replayed state is refused before anything else happens. The code is
exchanged with the sign-in's PKCE verifier. The tokens are not the person's yet: whoever
opened the link signed in, and a link can be forwarded. They are held (encrypted) and the
page shows a one-time code; the person the link was made for types it in their chat, which
makes the account theirs and resumes the waiting run (`bot/features/connections/held.py`,
`bot/conversation/connected.py`).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from redis.exceptions import RedisError

from bot.features.connections import oauth
from bot.features.connections.held import shown
from bot.features.connections.store import CALLBACK_PATH, METADATA_PATH, Connections

log = logging.getLogger(__name__)

PAGE = "<!doctype html><title>Parley</title><p>{text}</p>"
CODE_TEXT = (
    "You signed in to {server}. To finish, send this code to Parley in the chat where you "
    "asked: <b>{code}</b></p><p>Only send it if you started this sign-in yourself; never "
    "give it to anyone who asks for it. It works once and expires soon."
)


@dataclass(frozen=True, kw_only=True)
class OAuthCallback:
    connections: Connections

    def route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "GET", CALLBACK_PATH, self.handle

    def metadata_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        """Parley's Client ID Metadata Document: its client_id where a server accepts one."""
        return "GET", METADATA_PATH, self.metadata

    async def metadata(self, request: web.Request) -> web.Response:
        return web.Response(
            text=self.connections.client_metadata(), content_type="application/json"
        )

    async def handle(self, request: web.Request) -> web.Response:
        try:
            return await self._handle(request)
        except RedisError as exc:  # the state stays (a GETDEL that failed took nothing)
            log.warning("OAuth callback: Redis is unavailable (%s)", type(exc).__name__)
            return _page(503, "I can't finish the sign-in right now. Ask me again in a moment.")

    async def _handle(self, request: web.Request) -> web.Response:
        state = request.query.get("state", "")
        if not state or len(state) > 200:
            return _page(400, "This sign-in link is not valid.")
        pending = await self.connections.take_pending(state)
        if pending is None:
            log.info("OAuth callback with an unknown, expired or used state")
            return _page(400, "This sign-in link has expired or was already used. Ask me again.")
        name = html.escape(pending.server)
        if "error" in request.query or not request.query.get("code"):
            log.info("MCP server %s: the sign-in was not granted", pending.server)
            return _page(400, f"{name} did not grant access. Ask me again to retry.")
        try:
            tokens = await self.connections.finish(pending.server, pending.verifier, request.query)
        except (oauth.OAuthError, ConnectionError) as exc:
            log.warning("MCP server %s: code exchange failed (%s)", pending.server, exc)
            return _page(502, f"{name} did not complete the sign-in. Ask me again.")
        # not the person's yet: whoever opened the link signed in, so the person confirms
        code = await self.connections.hold(pending, tokens)
        log.info(
            "MCP server %s: a sign-in for a %s user awaits its code",
            pending.server,
            pending.platform,
        )
        return _page(200, CODE_TEXT.format(server=name, code=shown(code)))


def _page(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=PAGE.format(text=text), content_type="text/html")
