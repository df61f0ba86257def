"""What a Slack adapter is told: credentials, allowlists, limits and its surface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MAX_TEXT = 40_000  # characters: Slack truncates a message's text beyond this


@dataclass(frozen=True, kw_only=True)
class SlackConfig:
    bot_token: str
    signing_secret: str | None = None
    app_token: str | None = None
    api_url: str = "https://slack.com/api/"
    allowed_teams: tuple[str, ...] = ()
    allowed_channels: tuple[str, ...] = ()
    approver_groups: tuple[str, ...] = ()
    max_message_chars: int = MAX_TEXT
    handover_timeout: float = 2.0  # seconds to store an event, inside Slack's 3 s
    greeting: str = "Hi! I'm Parley. What can I do for you?"
    suggested_prompts: tuple[str, ...] = ()
    history_wait: float = 2.0  # seconds of a history read's Retry-After worth waiting in a run
    degraded_after: float = 60.0  # seconds of failing API calls before readiness says so
    # "agent": Slack's agent messaging (features.agent_view); "assistant": the older
    # Agents & AI Apps surface (features.assistant_view), for apps not migrated yet
    surface: Literal["agent", "assistant"] = "agent"
    # who memories shared with the team reach: the workspace, or its Enterprise Grid organisation
    team_memories: Literal["workspace", "organisation"] = "workspace"
    # Installed through OAuth v2 (one token per workspace): the app's credentials, the bot
    # scopes it asks for and the public base URL of /slack/install and /slack/oauth_redirect
    client_id: str | None = None
    client_secret: str | None = None
    scopes: tuple[str, ...] = ()
    public_url: str | None = None

    @property
    def installs(self) -> bool:
        """Whether workspaces install Parley through OAuth (no single bot token)."""
        return bool(self.client_id and self.client_secret)

    def admits(self, team: str | None, channel: str | None, enterprise: str | None = None) -> bool:
        """Whether the allowlists let this team and channel reach Parley at all. A team on the
        list is a workspace id (`T…`) or an Enterprise Grid organisation id (`E…`: all of its
        workspaces)."""
        if self.allowed_teams and not any(
            t and t in self.allowed_teams for t in (team, enterprise)
        ):
            return False
        return not (self.allowed_channels and channel not in self.allowed_channels)
