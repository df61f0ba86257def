"""Model-call metrics, on the default Prometheus registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

MODEL_CALLS = Counter(
    "parley_model_calls_total", "Model calls by provider and result", ["provider", "result"]
)
MODEL_LATENCY = Histogram(
    "parley_model_latency_seconds",
    "Model call latency by provider",
    ["provider"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
MODEL_TOKENS = Counter(
    "parley_model_tokens_total", "Tokens by provider and kind", ["provider", "kind"]
)
MODEL_COST = Counter(
    "parley_model_cost_dollars_total",
    "Estimated spend by provider and model",
    ["provider", "model"],
)
FALLBACKS = Counter(
    "parley_model_fallbacks_total", "Think steps answered by the fallback provider", ["reason"]
)
FALLBACK_LAST = Gauge(
    "parley_model_fallback_last_timestamp_seconds",
    "When a think step last went to the fallback provider, by reason (Unix time)",
    ["reason"],
)
BREAKER_STATE = Gauge(
    "parley_breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open", ["provider"]
)
BREAKER_TRANSITIONS = Counter(
    "parley_breaker_transitions_total", "Circuit breaker transitions", ["provider", "to"]
)
