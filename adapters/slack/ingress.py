"""How Slack requests reach Bolt: the HTTP route, its signature check, and what Bolt never sees.

HTTP mode verifies the signing secret and the 5-minute timestamp window (slack_sdk's
`SignatureVerifier`, before Bolt sees the request, so a refusal is one bounded log line).
Payloads Slack never sends (no event type, a button press with no actions) are a 400;
interactive payloads for UI Parley never shows, and Slack's own rate-limit notice, are
acknowledged before Bolt. When the handler cannot store an event (`HandoverFailed`) the
answer is a 503 (in Socket Mode: no ack), so Slack sends the event again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier

from adapters.base import HandoverFailed
from adapters.metrics import WEBHOOK_REJECTED
from adapters.slack.workspaces import RemovalWaits

log = logging.getLogger(__name__)

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
STALE_AFTER = 300  # seconds: slack_sdk's SignatureVerifier refuses older requests
# Interactive payloads for UI Parley never shows (modals, shortcuts, menus with external
# options, legacy attachments): acknowledged before Bolt, which could not match them all.
NOT_PARLEYS = {
    "view_submission",
    "view_closed",
    "shortcut",
    "message_action",
    "block_suggestion",
    "interactive_message",
    "dialog_submission",
    "dialog_cancellation",
    "dialog_suggestion",
}


@dataclass(kw_only=True)
class SlackIngress:
    app: AsyncApp
    signing_secret: str | None
    trouble: str | None = field(default=None, init=False)
    route_registered: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.app.error(self._on_error)

    def route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        self.route_registered = True
        return "POST", "/slack/events", self._http

    async def _http(self, request: web.Request) -> web.Response:
        body = await request.read()
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        if timestamp and not _TIMESTAMP.fullmatch(timestamp):
            log.info("refused a Slack request: %s", _summary(request, body))
            WEBHOOK_REJECTED.labels("slack", "malformed").inc()
            return web.Response(status=400, text="malformed timestamp")
        if not self._signed(body, timestamp, request.headers.get("X-Slack-Signature", "")):
            log.info("refused a Slack request with no valid signature: %s", _summary(request, body))
            WEBHOOK_REJECTED.labels("slack", "stale" if _stale(timestamp) else "signature").inc()
            return web.Response(status=401, text="invalid signature")
        try:
            bolt_request = await to_bolt_request(request)
        except Exception:
            return web.Response(status=400, text="malformed request")
        return await to_aiohttp_response(await self.dispatch(bolt_request))

    def _signed(self, body: bytes, timestamp: str, signature: str) -> bool:
        """Slack's v0 signature, within its 5-minute window."""
        if not self.signing_secret or not timestamp or not signature:
            return False
        try:
            verifier = SignatureVerifier(self.signing_secret)
            return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
        except (UnicodeDecodeError, ValueError):
            return False

    async def dispatch(self, request: AsyncBoltRequest) -> BoltResponse:
        """Bolt's dispatch; a payload Bolt cannot read is a 400, not a crash."""
        try:
            kind = request.body.get("type")
            if kind == "app_rate_limited":
                log.warning("Slack reports it is holding back events for this app (rate limited)")
                return BoltResponse(status=200, body="")
            if isinstance(kind, str) and kind in NOT_PARLEYS:
                return BoltResponse(status=200, body="")
            problem = _malformed(request.body)
            if problem is not None:
                log.warning("refused a Slack request: %s", problem)
                return BoltResponse(status=400, body="malformed request")
            return await self.app.async_dispatch(request)
        except Exception:
            log.warning("unreadable Slack request (%d bytes)", len(request.raw_body or ""))
            return BoltResponse(status=400, body="malformed request")

    async def _on_error(
        self, error: Exception, response: BoltResponse | None
    ) -> BoltResponse | None:
        """Not stored: 503, so Slack sends the event again (Socket Mode: no ack).

        A payload Bolt trips over while matching it is a 400 and one log line.
        """
        if isinstance(error, RemovalWaits):  # logged by its heartbeat, once each way
            return BoltResponse(status=503, body="try again") if response is not None else None
        if isinstance(error, HandoverFailed):
            if self.trouble is None:
                log.warning("Slack events are refused for now (%s); Slack will retry", error)
            self.trouble = str(error)
            return BoltResponse(status=503, body="try again") if response is not None else None
        if isinstance(error, LookupError | TypeError | AttributeError | ValueError):
            log.warning("refused a Slack payload Bolt cannot read (%s)", type(error).__name__)
            return BoltResponse(status=400, body="malformed request")
        log.error("Slack request failed", exc_info=error)
        return None  # Bolt answers 500

    def stored(self) -> None:
        if self.trouble is not None:
            log.info("Slack events are stored again")
            self.trouble = None


def _stale(timestamp: str) -> bool:
    """Outside Slack's 5-minute window (a replay, or a clock that is off): told apart from a
    wrong signature only for the count; the answer is the same."""
    return timestamp.isdigit() and abs(time.time() - int(timestamp)) > STALE_AFTER


def _malformed(body: dict[str, Any]) -> str | None:
    """What makes a payload one Slack never sends (and Bolt would trip over), if anything."""
    kind = body.get("type")
    if kind is not None and not isinstance(kind, str):
        return "a payload whose type is not a string"
    if kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return "an event envelope with no event type"
    if kind == "block_actions":
        actions = body.get("actions")
        if not actions or not isinstance(actions, list) or not isinstance(actions[0], dict):
            return "a button press with no actions"
    return None


def _summary(request: web.Request, body: bytes) -> str:
    """One bounded, escaped line about a refused request; never its content."""
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    kind = request.content_type[:60]
    return f"{len(body)} bytes of {kind!r} from {request.remote!r}, timestamp {timestamp[:24]!r}"
