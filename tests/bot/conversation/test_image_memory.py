"""Images decode within a memory bound: eight 40-megapixel photos arriving at once (which
took 800+ MiB decoded six at a time, past a pod's 768 MiB limit) stay under two decodes'
worth of memory in one worker process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Two images decoding at once, as Pillow holds RGB: four bytes a pixel. Unbounded: ~900 MiB.
CEILING_MIB = 2 * 40_000_000 * 4 / 2**20


@pytest.mark.heavy
@pytest.mark.process
def test_eight_40_megapixel_images_at_once_stay_under_the_memory_ceiling() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bot.decode_many", "8"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rise, peak = (float(n) for n in done.stdout.split())
    assert rise < CEILING_MIB, f"decoding rose the peak by {rise:.0f} MiB (to {peak:.0f})"
