"""What `parley doctor` checks about the services Parley reaches with credentials: the model
providers (Anthropic, Ollama) and the chat platforms (Slack, Telegram)."""

from __future__ import annotations

import datetime as dt

from agent.llm.catalog import lookup
from bot.config import Settings
from bot.ops.checks import CHECK_TIMEOUT, Check


async def check_anthropic(settings: Settings) -> Check:
    if settings.anthropic.api_key is None:
        return Check(
            name="anthropic",
            status="not configured",
            detail="ANTHROPIC_API_KEY is not set",
            hint="set ANTHROPIC_API_KEY to use the hosted model",
        )
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic.api_key.get_secret_value(),
        base_url=settings.anthropic.base_url,
        max_retries=0,
        timeout=CHECK_TIMEOUT,
    )
    try:
        await client.models.retrieve(settings.anthropic.model)
    except anthropic.AuthenticationError:
        return Check(
            name="anthropic",
            status="fail",
            detail="the API key was rejected",
            hint="check ANTHROPIC_API_KEY",
        )
    except anthropic.NotFoundError:
        return Check(
            name="anthropic",
            status="fail",
            detail=f"model {settings.anthropic.model!r} is unknown",
            hint="set ANTHROPIC_MODEL to a model your key can use",
        )
    except anthropic.APIError as exc:
        return Check(
            name="anthropic",
            status="fail",
            detail=f"API not reachable ({type(exc).__name__})",
            hint="check ANTHROPIC_BASE_URL and the network; Ollama will answer meanwhile",
        )
    finally:
        await client.close()
    return model_lifecycle(settings.anthropic.model) or Check(
        name="anthropic", status="ok", detail=f"key accepted, model {settings.anthropic.model}"
    )


def model_lifecycle(model: str, today: dt.date | None = None) -> Check | None:
    """A warning when the model is Legacy, deprecated or retired, naming its replacement."""
    known = lookup(model)
    if known is None:
        return None
    life = known.lifecycle(today)
    if life not in ("legacy", "deprecated", "retired"):
        return None
    label = {"legacy": "Legacy", "deprecated": "deprecated", "retired": "retired"}[life]
    detail = f"key accepted; {known.name} ({model}) is {label}"
    if known.retires is not None:
        verb = "retired on" if life == "retired" else "retires on"
        detail += f" ({verb} {known.retires.isoformat()})"
    successor = lookup(known.replacement)
    hint = (
        f"set ANTHROPIC_MODEL={known.replacement} ({successor.name})"
        if successor is not None
        else "set ANTHROPIC_MODEL to a current model"
    )
    return Check(
        name="anthropic", status="fail" if life == "retired" else "warn", detail=detail, hint=hint
    )


async def check_ollama(settings: Settings) -> Check:
    import ollama

    client = ollama.AsyncClient(host=settings.ollama.host, timeout=CHECK_TIMEOUT)
    try:
        listed = await client.list()
    except (ConnectionError, ollama.ResponseError, OSError) as exc:
        return Check(
            name="ollama",
            status="not configured",
            detail=f"no Ollama at {settings.ollama.host} ({type(exc).__name__})",
            hint="install Ollama and run `ollama serve`, or set OLLAMA_HOST (it is the fallback model)",
        )
    except Exception as exc:
        return Check(
            name="ollama",
            status="fail",
            detail=f"unexpected answer from {settings.ollama.host} ({type(exc).__name__})",
            hint="check OLLAMA_HOST",
        )
    names = {m.model for m in listed.models if m.model}
    wanted = settings.ollama.model
    if wanted not in names and f"{wanted}:latest" not in names:
        return Check(
            name="ollama",
            status="fail",
            detail=f"reachable, but model {wanted!r} is not pulled",
            hint=f"run `ollama pull {wanted}`, or set OLLAMA_MODEL to one of: {', '.join(sorted(names)) or 'none'}",
        )
    return Check(name="ollama", status="ok", detail=f"reachable, model {wanted} available")


def _check_slack_installs(settings: Settings) -> Check:
    """OAuth installs: each workspace's token comes from its install, so only what the flow
    needs is checked here."""
    missing = [
        name
        for name, value in (
            ("PARLEY_SECRET_KEY", settings.mcp.secret_key),
            ("PARLEY_PUBLIC_URL", settings.mcp.public_url),
            ("SLACK_SIGNING_SECRET", settings.slack.signing_secret),
        )
        if value is None
    ]
    if missing:
        return Check(
            name="slack",
            status="fail",
            detail=f"SLACK_CLIENT_ID / SLACK_CLIENT_SECRET are set but {', '.join(missing)} not",
            hint="OAuth installs keep tokens encrypted and need Slack's redirect: README 'Connect Slack'",
        )
    base = (settings.mcp.public_url or "").rstrip("/")
    return Check(
        name="slack",
        status="ok",
        detail=f"installs through OAuth: add to a workspace at {base}/slack/install "
        f"(redirect URL {base}/slack/oauth_redirect); {_team_memories(settings)}",
    )


def _team_memories(settings: Settings) -> str:
    """What PARLEY_SLACK_TEAM_MEMORIES makes a team, as doctor says it."""
    if settings.slack.team_memories == "organisation":
        return (
            "team memories shared across each Enterprise Grid organisation "
            "(a workspace in none keeps its own; earlier workspace ones stay readable there)"
        )
    return "team memories per workspace"


async def check_slack(settings: Settings) -> Check:
    if settings.slack.installs:
        return _check_slack_installs(settings)
    if settings.slack.bot_token is None:
        return Check(
            name="slack",
            status="not configured",
            detail="SLACK_BOT_TOKEN is not set",
            hint="see README 'Connect Slack' to add Parley to a workspace",
        )
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(
        token=settings.slack.bot_token.get_secret_value(),
        base_url=settings.slack.api_url,
        timeout=int(CHECK_TIMEOUT),
    )
    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        return Check(
            name="slack",
            status="fail",
            detail=f"auth.test failed: {exc.response.get('error', 'unknown error')}",
            hint="check SLACK_BOT_TOKEN (it starts with xoxb-)",
        )
    except Exception as exc:
        return Check(
            name="slack",
            status="fail",
            detail=f"Slack API not reachable ({type(exc).__name__})",
            hint="check SLACK_API_URL and the network",
        )
    missing = []
    if settings.slack.signing_secret is None and settings.slack.app_token is None:
        missing.append("SLACK_SIGNING_SECRET (HTTP events) or SLACK_APP_TOKEN (Socket Mode)")
    if missing:
        return Check(
            name="slack",
            status="fail",
            detail=f"token valid for {auth.get('team')}, but {missing[0]} is not set",
            hint="Parley cannot receive Slack events without one of them",
        )
    mode = "Socket Mode" if settings.slack.app_token else "HTTP events on /slack/events"
    return Check(
        name="slack",
        status="ok",
        detail=f"bot @{auth.get('user')} in {auth.get('team')}, {mode}; {_team_memories(settings)}",
    )


async def check_telegram(settings: Settings) -> Check:
    if settings.telegram.token is None:
        return Check(
            name="telegram",
            status="not configured",
            detail="TELEGRAM_BOT_TOKEN is not set",
            hint="create a bot with @BotFather and set TELEGRAM_BOT_TOKEN",
        )
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    root = settings.telegram.api_url.rstrip("/")
    bot = Bot(
        settings.telegram.token.get_secret_value(),
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
    )
    try:
        me = await bot.get_me()
    except InvalidToken:
        return Check(
            name="telegram",
            status="fail",
            detail="getMe rejected the token",
            hint="check TELEGRAM_BOT_TOKEN",
        )
    except TelegramError as exc:
        return Check(
            name="telegram",
            status="fail",
            detail=f"Bot API not reachable ({type(exc).__name__})",
            hint="check TELEGRAM_API_URL and the network",
        )
    if settings.telegram.mode == "webhook" and not settings.telegram.webhook_url:
        return Check(
            name="telegram",
            status="fail",
            detail=f"@{me.username}: webhook mode without PARLEY_TELEGRAM_WEBHOOK_URL",
            hint="set the public URL that reaches /telegram/webhook, or use polling",
        )
    from bot.runtime.pairing import access_line

    detail = f"bot @{me.username}, {settings.telegram.mode}; {access_line(settings)}"
    if settings.telegram.access == "open" and not settings.telegram.allowed_users:
        hint = "anyone may use it; PARLEY_TELEGRAM_ACCESS=pairing lets in only those you accept"
        return Check(name="telegram", status="warn", detail=detail, hint=hint)
    return Check(name="telegram", status="ok", detail=detail)
