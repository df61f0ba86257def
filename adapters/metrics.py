"""The adapters' Prometheus metrics, on the default registry (`/metrics` exposes them all)."""

from __future__ import annotations

from prometheus_client import Counter

WEBHOOK_REJECTED = Counter(
    "parley_webhook_rejected_total",
    "Webhook requests refused because they could not prove who sent them",
    # platform: slack, telegram, hooks (triggers); reason: signature, stale, malformed, secret
    ["platform", "reason"],
)
