"""Shared pieces of the benchmarks: a throwaway Redis Stack and percentiles."""

from __future__ import annotations

import contextlib
import statistics
import tempfile
from collections.abc import Iterator

from bot.ops.embedded_redis import EmbeddedRedis


@contextlib.contextmanager
def throwaway_redis() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(folder, persistent=False)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def describe(values: list[float]) -> str:
    """Median and p95 in milliseconds."""
    return f"p50 {statistics.median(values) * 1000:.2f} ms, p95 {percentile(values, 0.95) * 1000:.2f} ms"


def bench_line(name: str, *, ok: bool, **figures: object) -> None:
    """The last line of every bench: its figures against the goals, greppable."""
    shown = " ".join(f"{key}={value}" for key, value in figures.items())
    print(f"BENCH {name} {shown} ok={'true' if ok else 'false'}", flush=True)
