"""Whether a channel is inside the allowlists, when a team on them may be an organisation.

`PARLEY_SLACK_ALLOWED_TEAMS` names workspaces (`T…`) and Enterprise Grid organisations
(`E…`: all of their workspaces). `conversations.info` names the workspaces a channel lives in
(`context_team_id`, `conversation_host_id`, `shared_team_ids`) and, for some channels of an
organisation, the organisation itself (`enterprise_id`); for the rest, Slack's `team.info`
says which organisation a workspace belongs to (`team.enterprise_id`, scope `team:read`).
That answer is kept an hour per workspace; a workspace Slack will not tell about belongs to
no organisation here, so its channels stay outside an organisation-only allowlist.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ChannelInfo
from adapters.slack.config import SlackConfig

log = logging.getLogger(__name__)

ORG_SECONDS = 3600.0  # a workspace's organisation is looked up again after this long
ORGS_KEPT = 1000  # workspaces remembered at most; all forgotten past it


@dataclass(kw_only=True)
class Organisations:
    client: AsyncWebClient
    _found: dict[str, tuple[float, str | None]] = field(default_factory=dict)

    async def allowed(self, config: SlackConfig, info: ChannelInfo) -> bool:
        """Whether the allowlists let Parley read the channel `info` describes."""
        if config.allowed_channels and info.id not in config.allowed_channels:
            return False
        allowed = set(config.allowed_teams)
        if not allowed or info.teams & allowed or info.enterprises & allowed:
            return True
        if not any(a.startswith("E") for a in allowed):
            return False
        for team in sorted(info.teams):
            if await self.of(team) in allowed:
                return True
        return False

    async def of(self, team: str) -> str | None:
        """The organisation the workspace `team` belongs to (None: none, or Slack won't say)."""
        cached = self._found.get(team)
        if cached is not None and time.monotonic() - cached[0] < ORG_SECONDS:
            return cached[1]
        try:
            response = await self.client.team_info(team=team)
            org = str((response.get("team") or {}).get("enterprise_id") or "") or None
        except SlackApiError as exc:
            log.info("no organisation for workspace %s (%s)", team, exc.response.get("error"))
            org = None
        except aiohttp.ClientError as exc:  # not kept: asked again next time
            log.info("no organisation for workspace %s (%s)", team, type(exc).__name__)
            return None
        if len(self._found) >= ORGS_KEPT:
            self._found.clear()
        self._found[team] = (time.monotonic(), org)
        return org
