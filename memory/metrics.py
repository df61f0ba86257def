"""Memory's Prometheus metrics (on the default registry, so `/metrics` shows them)."""

from __future__ import annotations

from prometheus_client import Counter

FULL = Counter(
    "parley_memory_full_total",
    "New memories refused because their scope held its limit",
    ["scope"],
)
EVICTED = Counter(
    "parley_memory_evicted_total",
    "Extracted memories dropped to make room for newer extracted ones",
    ["scope"],
)
