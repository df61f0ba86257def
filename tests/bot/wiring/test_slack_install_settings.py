"""SLACK_CLIENT_ID / SLACK_CLIENT_SECRET: Slack installs through OAuth, and doctor says what
else that needs (an encryption key for the tokens, the public URL of the redirect)."""

from __future__ import annotations

from cryptography.fernet import Fernet

from bot.config import SLACK_BOT_SCOPES, Settings
from bot.ops.service_checks import check_slack
from bot.runtime.keys import Keys
from bot.wiring.platforms import Platforms

OAUTH = {"SLACK_CLIENT_ID": "111.222", "SLACK_CLIENT_SECRET": "oauth-client-secret"}


async def test_oauth_installs_without_a_key_or_public_url_fail_doctor_naming_them() -> None:
    settings = Settings.load(env_file=None, slack=OAUTH)
    assert settings.slack.installs and "slack" in settings.chat_platforms()
    assert settings.slack.bot_token is None
    check = await check_slack(settings)
    assert check.status == "fail"
    assert "PARLEY_SECRET_KEY" in check.detail and "PARLEY_PUBLIC_URL" in check.detail
    assert "SLACK_SIGNING_SECRET" in check.detail


async def test_oauth_installs_with_everything_say_where_to_install() -> None:
    settings = Settings.load(
        env_file=None,
        slack={**OAUTH, "SLACK_SIGNING_SECRET": "s" * 32},
        mcp={
            "PARLEY_SECRET_KEY": Fernet.generate_key().decode(),
            "PARLEY_PUBLIC_URL": "https://parley.example.com",
        },
    )
    check = await check_slack(settings)
    assert check.status == "ok"
    assert "https://parley.example.com/slack/install" in check.detail
    assert settings.slack.scopes == list(SLACK_BOT_SCOPES)


def test_one_token_stays_the_default() -> None:
    settings = Settings.load(env_file=None, slack={"SLACK_BOT_TOKEN": "xoxb-one"})
    assert not settings.slack.installs and "slack" in settings.chat_platforms()


async def test_doctor_says_what_a_team_means_for_team_memories() -> None:
    keys = {
        "PARLEY_SECRET_KEY": Fernet.generate_key().decode(),
        "PARLEY_PUBLIC_URL": "https://parley.example.com",
    }
    slack = {**OAUTH, "SLACK_SIGNING_SECRET": "s" * 32}
    default = Settings.load(env_file=None, slack=slack, mcp=keys)
    assert default.slack.team_memories == "workspace"
    assert "team memories per workspace" in (await check_slack(default)).detail
    org = Settings.load(
        env_file=None, slack={**slack, "PARLEY_SLACK_TEAM_MEMORIES": "organisation"}, mcp=keys
    )
    detail = (await check_slack(org)).detail
    assert "team memories shared across each Enterprise Grid organisation" in detail
    assert "earlier workspace ones stay readable" in detail


def test_the_slack_adapter_is_told_what_a_team_means(redis) -> None:
    async def handler(event: object) -> None:
        return None

    for value, org_team in (("workspace", False), ("organisation", True)):
        slack = {"SLACK_BOT_TOKEN": "xoxb-one", "PARLEY_SLACK_TEAM_MEMORIES": value}
        settings = Settings.load(env_file=None, slack=slack)
        platforms = Platforms(settings, redis, Keys(), handler)
        assert platforms.slack is not None and platforms.slack.org_team is org_team
