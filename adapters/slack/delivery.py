"""How a Slack Web API call fails: slack_sdk's errors mapped once.

`delivery()` is the one place slack_sdk's errors become the adapter error tree: Slack's
refusals (channel_not_found, not_in_channel, is_archived, account_inactive, …) are
`Undeliverable`; rate limits, Slack's own failures (5xx) and the network are `DeliveryFailed`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.base import DeliveryFailed, Undeliverable
from adapters.health import ApiHealth

# Slack errors that may pass; any other error code is a refusal that trying again won't change.
_TRANSIENT = {
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
}
# Refusals that mean every call will fail the same way: Slack's trouble for readiness.
_AUTH = {"invalid_auth", "not_authed", "token_revoked", "account_inactive"}


@contextlib.contextmanager
def observed(health: ApiHealth) -> Iterator[None]:
    """Tell `health` whether Slack answered; slack_sdk's errors pass unchanged."""
    try:
        yield
    except SlackApiError as exc:
        code = str(exc.response.get("error") or "")
        if _transient(exc) or code in _AUTH:
            health.failed(code or f"HTTP {exc.response.status_code}")
        else:
            health.succeeded()  # Slack answered, only not as asked
        raise
    except (aiohttp.ClientError, TimeoutError) as exc:
        health.failed(type(exc).__name__)
        raise
    health.succeeded()


@contextlib.contextmanager
def delivery(health: ApiHealth) -> Iterator[None]:
    """Web API failures as the adapter error tree; `health` hears whether Slack answered."""
    try:
        with observed(health):
            yield
    except SlackApiError as exc:
        reason = str(exc.response.get("error") or "") or f"HTTP {exc.response.status_code}"
        if _transient(exc):
            raise DeliveryFailed(reason) from exc
        raise Undeliverable(reason) from exc
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise DeliveryFailed(type(exc).__name__) from exc


def _transient(exc: SlackApiError) -> bool:
    return exc.response.get("error") in _TRANSIENT or exc.response.status_code >= 500


def error_code(exc: SlackClientError) -> str:
    """Slack's error code for a log line, or the kind of client failure."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or "error")
    return type(exc).__name__
