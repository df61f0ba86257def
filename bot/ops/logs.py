"""Logging: text for people, JSON for machines; secrets never reach a line."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path

from bot.ops.secrets import redact

# Set by the workers so every line of a run carries its conversation and run ids.
log_context: ContextVar[dict[str, str] | None] = ContextVar("parley_log_context", default=None)


class RedactingFilter(logging.Filter):
    """Replaces every configured secret in a record's message with `[redacted]`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        redacted = self._redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        return True

    def _redact(self, text: str) -> str:
        return redact(text, self.secrets)  # the secrets, and any URL's password


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(log_context.get() or {})
        if record.exc_info or record.exc_text:
            entry["exception"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = log_context.get()
        if context:
            line += " [" + " ".join(f"{k}={v}" for k, v in context.items()) + "]"
        return line


def configure_logging(
    level: str, fmt: str, secrets: Iterable[str] = (), *, file: Path | None = None
) -> None:
    """Log to stderr, or to `file` where the terminal belongs to a conversation or a table."""
    handler: logging.Handler
    if file is None:
        handler = logging.StreamHandler()
    else:
        file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(file, encoding="utf-8")
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    for replaced in root.handlers:
        if isinstance(replaced, logging.FileHandler):  # a command's log file, done with
            replaced.close()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs each request's URL at INFO, and an MCP server's URL may carry a key
    for noisy in ("httpx", "httpx2", "httpcore", "aiohttp.access", "telegram.ext", "slack_bolt"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
