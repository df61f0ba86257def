"""Bolt's app, and Slack installs through its OAuth v2 flow (`SLACK_CLIENT_ID` /
`SLACK_CLIENT_SECRET`).

Add to Slack at `<PARLEY_PUBLIC_URL>/slack/install`, Slack's answer at
`<PARLEY_PUBLIC_URL>/slack/oauth_redirect`; the installation store authorises every request
(Bolt's auth.test, cached per token) and each listener sends with that workspace's token
(`workspaces.py`). `app_uninstalled` and a revoked bot token (`tokens_revoked`) delete what
Parley keeps for that workspace, or for the organisation of an org-wide install.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.config import SlackConfig
from adapters.slack.workspaces import Installations, Workspaces

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
Route = tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]


def oauth_settings(
    config: SlackConfig, store: Installations, states: AsyncOAuthStateStore | None
) -> AsyncOAuthSettings:
    assert config.public_url, "OAuth installs need PARLEY_PUBLIC_URL"
    settings = AsyncOAuthSettings(
        client_id=config.client_id,
        client_secret=config.client_secret,
        scopes=list(config.scopes),
        redirect_uri=config.public_url.rstrip("/") + REDIRECT_PATH,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        installation_store=store,  # type: ignore[arg-type]
        installation_store_bot_only=True,
        state_store=states,
    )
    settings.authorize = AsyncInstallationStoreAuthorize(
        logger=logging.getLogger("slack_bolt.AsyncApp"),
        installation_store=store,  # type: ignore[arg-type]
        client_id=config.client_id,
        client_secret=config.client_secret,
        bot_only=True,
        cache_enabled=True,  # one auth.test per token, not one per event
    )
    return settings


def oauth_routes(app: AsyncApp) -> list[Route]:
    """The two GET routes of the flow; none when installs do not go through OAuth."""
    flow = app.oauth_flow
    if flow is None:
        return []

    async def install(request: web.Request) -> web.Response:
        bolt_request = await to_bolt_request(request)
        return await to_aiohttp_response(await flow.handle_installation(bolt_request))

    async def redirect(request: web.Request) -> web.Response:
        bolt_request = await to_bolt_request(request)
        return await to_aiohttp_response(await flow.handle_callback(bolt_request))

    return [("GET", flow.install_path, install), ("GET", flow.redirect_uri_path, redirect)]


@dataclass(kw_only=True)
class InstallEvents:
    workspaces: Workspaces

    def register(self, app: AsyncApp) -> None:
        """Before the adapter's catch-all listener: Bolt runs the first that matches."""
        app.use(self._bind)
        app.event("app_uninstalled")(self._uninstalled)
        app.event("tokens_revoked")(self._revoked)

    async def _bind(
        self, context: AsyncBoltContext, body: dict[str, Any], next: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Bolt found this request's installation: its listeners send with that token."""
        self.workspaces.bind(context.bot_token, context.bot_user_id)
        if context.is_enterprise_install:
            team = body.get("team_id") or (body.get("user") or {}).get("team_id")
            try:
                await self.workspaces.note(
                    context.enterprise_id, team if isinstance(team, str) else None
                )
            except Exception as exc:  # written again with the organisation's next event
                log.warning("could not note a workspace's organisation (%s)", type(exc).__name__)
        return await next()

    async def _uninstalled(self, context: AsyncBoltContext) -> None:
        team = None if context.is_enterprise_install else context.team_id
        log.info("Slack app uninstalled from %s", team or context.enterprise_id)
        await self.workspaces.removed(context.enterprise_id, team)

    async def _revoked(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        if not (event.get("tokens") or {}).get("bot"):
            return  # only people's tokens, which Parley does not keep
        team = None if context.is_enterprise_install else context.team_id
        log.info("Slack bot token revoked in %s", team or context.enterprise_id)
        await self.workspaces.removed(context.enterprise_id, team)


def bolt_app(
    client: AsyncWebClient, signing_secret: str | None, oauth: AsyncOAuthSettings | None = None
) -> AsyncApp:
    """Bolt on our client. Bolt also reads SLACK_BOT_TOKEN and, finding both, warns that the
    token is unused; it is the very token the client carries, so that one line is dropped."""
    bolt_log = logging.getLogger("slack_bolt.AsyncApp")
    known = _Dropping(warning_client_prioritized_and_token_skipped())
    bolt_log.addFilter(known)
    try:
        return AsyncApp(
            name="parley",  # unnamed, Bolt reads the caller's file off inspect.stack(): ~0.1 s
            client=client,
            signing_secret=signing_secret or "",
            request_verification_enabled=False,  # done by the ingress, with a bounded log line
            ignoring_self_events_enabled=True,
            process_before_response=True,  # stored first, then acknowledged
            oauth_settings=oauth,
        )
    finally:
        bolt_log.removeFilter(known)


class _Dropping(logging.Filter):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.message
