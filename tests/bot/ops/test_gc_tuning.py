"""The garbage collector after start-up: frozen heap, thresholds, pauses on /metrics."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY

from bot.config import Settings
from bot.ops.gc_tuning import GcTuning


def pauses(generation: int) -> float:
    labels = {"generation": str(generation)}
    return REGISTRY.get_sample_value("parley_gc_pause_seconds_count", labels) or 0.0


def test_start_up_objects_are_frozen_and_every_pause_is_timed() -> None:
    before = gc.get_threshold()
    survivor = [object() for _ in range(1000)]  # alive at start-up
    tuning = GcTuning(freeze=True, threshold=(5000, 15, 15))
    tuning.install()
    try:
        assert gc.get_freeze_count() >= len(survivor)
        assert gc.get_threshold() == (5000, 15, 15)
        counted = pauses(2)
        cpu = REGISTRY.get_sample_value("parley_gc_cpu_seconds_total", {"generation": "2"})
        gc.collect()
        assert pauses(2) == counted + 1
        spent = REGISTRY.get_sample_value("parley_gc_cpu_seconds_total", {"generation": "2"})
        assert spent is not None and spent > (cpu or 0.0)
    finally:
        tuning.uninstall()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    assert tuning._observe not in gc.callbacks


def test_the_settings_read_thresholds_as_three_numbers() -> None:
    settings = Settings.load(env_file=None, runtime={"gc_threshold": "20000, 10, 5"})
    assert settings.runtime.gc_threshold == (20000, 10, 5)
    assert Settings.load(env_file=None).runtime.gc_freeze is True
