"""Every secret Parley is configured with, and the places they must never appear.

The settings' tokens and keys, a password in REDIS_URL, the triggers' secrets and what the MCP
file hands its servers (`agent.mcp.config.secrets_in`). Log lines are redacted by
`bot.ops.logs.RedactingFilter`; what the CLI prints goes through `RedactingStream`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from bot.config import Settings

REDACTED = "[redacted]"
SHORTEST = 6  # shorter values would redact ordinary words


def configured_secrets(settings: Settings) -> list[str]:
    values = [
        settings.anthropic.api_key,
        settings.telegram.token,
        settings.telegram.webhook_secret,
        settings.slack.bot_token,
        settings.slack.signing_secret,
        settings.slack.app_token,
        settings.voice.transcribe_api_key,
        settings.redis.password,
    ]
    found = [v.get_secret_value() for v in values if v is not None]
    if settings.redis.url:
        found.append(urlsplit(settings.redis.url).password or "")
    if settings.mcp.config is not None:
        from agent.mcp.config import secrets_in

        found += secrets_in(settings.mcp.config)
    found += _trigger_secrets(settings.schedules.triggers_config)
    return sorted({s for s in found if len(s) >= SHORTEST}, key=len, reverse=True)


def _trigger_secrets(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return [str(spec.get("secret") or "") for spec in raw.values() if isinstance(spec, dict)]
    except (OSError, ValueError, AttributeError):
        return []  # loading the file says what is wrong with it


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


class RedactingStream(io.TextIOBase):
    """A text stream (stdout, stderr) that writes through to another with secrets redacted."""

    def __init__(self, target: TextIO, secrets: list[str]) -> None:
        super().__init__()
        self.target = target
        self.secrets = secrets

    def write(self, text: str) -> int:
        self.target.write(redact(text, self.secrets))
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return self.target.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.target.encoding
