"""The public listener's routes, in one place: what the platforms, the triggers' senders and
people's browsers call from outside. The shipped Ingress must route each of them
(tests/deploy/test_public_paths.py reads it against this list).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.features.triggers import REPLAY_WINDOW, Hooks, Trigger
from bot.ops.http import Route
from bot.runtime.inbox import Inbox

if TYPE_CHECKING:
    from bot.features.connections.store import Connections
    from bot.wiring.platforms import Platforms


def public_routes(
    settings: Settings,
    platforms: Platforms,
    inbox: Inbox,
    *,
    triggers: Mapping[str, Trigger],
    connections: Connections | None,
) -> list[Route]:
    """Slack's events and Telegram's webhook (as configured), `/hooks/{name}` with triggers,
    and `/oauth/callback` (with Parley's Client ID Metadata Document,
    `/client-metadata.json`) when people connect their own accounts."""
    routes = platforms.routes()
    if triggers:
        # a delivery id is kept at least as long as its signed timestamp passes
        ttl = max(settings.runtime.dedup_ttl, REPLAY_WINDOW)
        dedup = Inbox(inbox.redis, inbox.keys, dedup_ttl=ttl)
        routes.append(Hooks(triggers=dict(triggers), submit=dedup.submit).route())
    if connections is not None:
        from bot.features.connections.callback import OAuthCallback  # loads the MCP SDK

        callback = OAuthCallback(connections=connections)
        routes += [callback.route(), callback.metadata_route()]
    return routes
