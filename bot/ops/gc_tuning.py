"""Garbage collection for a long-lived service with a large heap built at start-up.

What start-up builds (the embedding model, SDK clients, pydantic schemas, the tool registry)
lives as long as the process, yet every full collection walked all of it: under load, full
collections paused `parley run` for 126–199 ms about every 0.7 s. `gc.freeze()` once
start-up is over moves all of it out of the collector's sight; collections then only walk
what requests allocate. The thresholds (`PARLEY_GC_THRESHOLD`) were chosen with
bench_service, which prints the pause distribution that `parley_gc_pause_seconds` records.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from prometheus_client import Counter, Histogram

log = logging.getLogger(__name__)

GC_PAUSE = Histogram(
    "parley_gc_pause_seconds",
    "Garbage collection pauses by generation",
    ["generation"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5),
)
# The pauses above are wall time, which a busy machine stretches; this is what they cost.
GC_CPU = Counter(
    "parley_gc_cpu_seconds_total", "CPU time spent collecting, by generation", ["generation"]
)


class GcTuning:
    """Freezes the start-up heap, sets the thresholds and times every collection."""

    def __init__(self, *, freeze: bool, threshold: tuple[int, int, int]) -> None:
        self.freeze = freeze
        self.threshold = threshold
        self._previous = gc.get_threshold()
        self._started = (0.0, 0.0)

    def install(self) -> None:
        if self.freeze:
            gc.collect()  # what is garbage now should not be frozen for ever
            gc.freeze()
        gc.set_threshold(*self.threshold)
        gc.callbacks.append(self._observe)
        log.info(
            "garbage collection: %d start-up objects frozen, thresholds %s",
            gc.get_freeze_count(),
            self.threshold,
        )

    def uninstall(self) -> None:
        gc.set_threshold(*self._previous)
        if self.freeze:
            gc.unfreeze()
        if self._observe in gc.callbacks:
            gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = (time.perf_counter(), time.thread_time())
            return
        generation = str(info["generation"])
        GC_PAUSE.labels(generation).observe(time.perf_counter() - self._started[0])
        GC_CPU.labels(generation).inc(time.thread_time() - self._started[1])
