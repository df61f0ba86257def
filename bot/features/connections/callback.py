"""`GET /oauth/callback` on the public listener: where a person's sign-in comes back.

The state must name a pending sign-in (`connections.Pending`), which is taken as it is read:
a forged, expired or replayed state is refused before anything else happens. The code is
exchanged with the sign-in's PKCE verifier, the tokens are stored encrypted for the person
the state was made for, and one `connected` event is handed to the conversation whose run
waits; that conversation resumes the run there (`bot/conversation/connected.py`).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from adapters.base import Actor, ConversationKey, HandoverFailed, InboundMessage
from bot.features.connections import oauth
from bot.features.connections.store import CALLBACK_PATH, METADATA_PATH, Connections

log = logging.getLogger(__name__)

Submit = Callable[[InboundMessage], Awaitable[bool]]
CONNECTED_TEXT = "I connected my {server} account."
PAGE = "<!doctype html><title>Parley</title><p>{text}</p>"


@dataclass(frozen=True, kw_only=True)
class OAuthCallback:
    connections: Connections
    submit: Submit

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
        await self.connections.store(pending.server, pending.platform, pending.user_id, tokens)
        log.info("MCP server %s connected for a %s user", pending.server, pending.platform)
        conversation = ConversationKey.parse(pending.conversation_id)
        event = InboundMessage(
            event_id=f"connected:{pending.question_id}",
            conversation=conversation,
            actor=Actor(
                platform=conversation.platform,
                user_id=pending.user_id,
                name=pending.user_name,
                team_id=pending.team_id,
            ),
            text=CONNECTED_TEXT.format(server=pending.server),
            is_direct=pending.is_direct,
            kind="connected",
            args=pending.question_id,
        )
        try:
            await self.submit(event)
        except HandoverFailed:  # connected all the same: the next request goes on
            log.warning("could not resume the run waiting for %s", pending.server)
        return _page(200, f"{name} is connected. You can go back to the chat.")


def _page(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=PAGE.format(text=text), content_type="text/html")
