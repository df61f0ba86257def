"""The service's Prometheus metrics, on the default registry (`/metrics` exposes them all).

Model-call metrics live with the providers in `agent/llm/metrics.py`.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

MESSAGES_IN = Counter(
    "parley_messages_in_total", "Platform events accepted into the inbox", ["platform", "kind"]
)
MESSAGES_DROPPED = Counter(
    "parley_messages_dropped_total", "Platform events not queued", ["platform", "reason"]
)
DEAD_LETTERS = Counter(
    "parley_dead_letters_total",
    "Inbox entries moved to the dead-letter stream",
    ["reason"],  # undecodable, failed
)
RUNS = Counter("parley_runs_total", "Agent runs by outcome", ["outcome"])
RUN_STEPS = Histogram(
    "parley_run_steps", "Think steps per run", buckets=(1, 2, 3, 4, 6, 8, 12, 20, 50)
)
RUN_SECONDS = Histogram("parley_run_seconds", "Wall time of one agent run or resumption")
TOOL_CALLS = Counter("parley_tool_calls_total", "Tool calls by tool and result", ["tool", "result"])
QUEUE_LENGTH = Gauge("parley_queue_length", "Inbox stream entries not yet delivered to a worker")
QUEUE_LAG = Histogram(
    "parley_queue_lag_seconds",
    "From inbox to a worker picking the event up",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PENDING_DECISIONS = Gauge(
    "parley_pending_decisions", "Questions and approvals waiting for a person", ["kind"]
)
DELIVERIES = Counter(
    "parley_deliveries_total", "Outbound messages by platform and result", ["platform", "result"]
)
REMINDERS = Counter("parley_reminders_total", "Reminders by result", ["result"])
DUE_UNREADABLE = Counter(
    "parley_due_unreadable_total",
    "Due records skipped as unreadable (dropped, or kept for an operator), by kind",
    ["kind"],
)
FOLLOWED_TASKS = Gauge("parley_mcp_tasks_followed", "MCP tasks followed past their call")
LIMITED = Counter("parley_limited_total", "Requests refused by a limit", ["limit"])
SCHEDULES = Gauge("parley_schedules", "Schedules by state", ["state"])  # active, paused
SCHEDULE_RUNS = Counter(
    "parley_schedule_runs_total",
    "Scheduled and triggered runs by outcome",
    # started, finished, failed, awaiting, skipped, paused, cancelled
    ["outcome"],
)
SCHEDULE_LATENESS = Histogram(
    "parley_schedule_lateness_seconds",
    "From a schedule's slot to its run being queued",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600, 86_400),
)
TRIGGERS = Counter(
    "parley_trigger_deliveries_total",
    "Webhook trigger deliveries by result",
    ["result"],  # started, duplicate, bad_signature, stale, unknown, too_large, unavailable
)
