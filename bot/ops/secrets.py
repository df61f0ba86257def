"""Every secret Parley is configured with, and the places they must never appear.

The settings' tokens and keys, a password in REDIS_URL, the triggers' secrets and what the MCP
file hands its servers (`agent.mcp.config.secrets_in`). Log lines are redacted by
`bot.ops.logs.RedactingFilter`; what the CLI prints goes through `RedactingStream`; `seal`
keeps them from child processes and from anyone reading this process's /proc files.
"""

from __future__ import annotations

import ctypes
import io
import json
import logging
import os
import re
from pathlib import Path
from typing import TextIO
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr

from agent.isolation import undumpable
from bot.config import Settings

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
SHORTEST = 6  # shorter values would redact ordinary words
# The password of any URL (`redis://user:password@host`), whatever its length or spelling:
# a REDIS_URL, an MCP server's or a model host's URL, in a log line, an error or doctor.
URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+@", re.IGNORECASE)


def configured_secrets(settings: Settings) -> list[str]:
    # every SecretStr setting, so a new one (PARLEY_SECRET_KEY was missed) cannot be left out
    values = [
        value
        for name in Settings.model_fields
        for value in dict(getattr(settings, name)).values()
        if isinstance(value, SecretStr)
    ]
    found = [v.get_secret_value() for v in values]
    if settings.redis.url:
        password = urlsplit(settings.redis.url).password or ""
        found += [password, unquote(password)]  # as written, and as the client sends it
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
    return URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", text) if "://" in text else text


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


def seal(secrets: list[str]) -> None:
    """After the settings are read: make this process non-dumpable (its /proc environ and mem
    then need CAP_SYS_PTRACE, which children lose: `agent.isolation`), take every variable
    holding a secret out of the environment children inherit, and blank the secrets in the
    environment block /proc/<pid>/environ shows. os.environ keeps them for Parley's own use
    (an MCP file's `${VAR}`)."""
    if not undumpable():
        log.warning("could not make the process non-dumpable; children may read its memory")
    for name, value in list(os.environ.items()):
        if any(secret in value for secret in secrets):
            os.unsetenv(name)
    try:
        _blank_environ_block(secrets)
    except (OSError, ValueError, IndexError) as exc:
        log.warning("could not blank secrets in the environment block (%s)", type(exc).__name__)


def _blank_environ_block(secrets: list[str]) -> None:
    """Overwrite, in place, each secret in the block the kernel shows as /proc/self/environ."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51
    block = Path("/proc/self/environ").read_bytes()[: end - start]
    for secret in (s.encode() for s in secrets):
        at = block.find(secret)
        while at >= 0:
            ctypes.memset(start + at, ord("*"), len(secret))
            at = block.find(secret, at + len(secret))
