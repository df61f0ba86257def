"""What a Telegram adapter is told: the token, the API, how updates arrive, limits."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.telegram.inbound import MAX_TEXT


@dataclass(frozen=True, kw_only=True)
class TelegramConfig:
    token: str
    api_url: str = "https://api.telegram.org"
    mode: str = "polling"
    webhook_url: str | None = None
    webhook_secret: str | None = None
    allowed_users: tuple[str, ...] = ()
    open_access: bool = False  # PARLEY_TELEGRAM_ACCESS=open: no allowlist lets anyone in
    max_message_chars: int = MAX_TEXT  # the Bot API's limit on a message's text
    poll_timeout: int = 30  # seconds of each long poll
    retries: int = 3  # attempts after a 429 RetryAfter
    handover_timeout: float = 5.0  # seconds the handler may take to store one update
    backoff: float = 0.2  # first pause (s) after a failed poll or handover; grows, jittered
    backoff_max: float = 10.0
    # Polling counts as stuck when no getUpdates succeeded for 2 * poll_timeout + this.
    stale_margin: float = 15.0
    max_file_bytes: int = 20 * 1024 * 1024  # photos: the largest size within this
    degraded_after: float = 60.0  # seconds of failing API calls before readiness says so
    ephemeral_prompts: bool = True  # a prompt's audience sees it alone in a group (Bot API 10.2)
    # seconds an ephemeral prompt may go unanswered before it is offered again where it
    # will arrive (reoffer.py); 0: never
    reoffer_after: float = 300.0
