"""PDFs built to eat memory: a 13 KiB page that drives pypdf past 350 MiB, sent three at a
time. The readers stay under their ceiling and few at once, so a worker pod's memory limit
(768 MiB) is never reached; each sender gets one sentence."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.conversation.documents import TOO_MUCH, UnreadableDocument
from bot.conversation.pdf_process import PdfReader
from tests.adapters.samples import pdf
from tests.adapters.test_hostile_files import hungry_pdf, pdf_readers, slow_pdf

pytestmark = pytest.mark.process
MIB = 1024 * 1024


def peak_of(pid: int) -> int:
    """A process's peak address space, in bytes (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"VmPeak:\s+(\d+) kB", status)
    return int(found[1]) * 1024 if found else 0


async def watch(reads: asyncio.Future[Any]) -> tuple[Any, int, int]:
    """The reads' sentences, the most readers seen at once, and the highest peak among them."""
    most, peak = 0, 0
    while not reads.done():
        children = pdf_readers()
        most = max(most, len(children))
        peak = max([peak, *(peak_of(pid) for pid in children)])
        await asyncio.sleep(0.02)
    return await reads, most, peak


async def read(reader: PdfReader, name: str, data: bytes) -> str:
    try:
        await reader.read(name, data, 40_000)
    except UnreadableDocument as exc:
        return exc.sentence
    return "read"


async def test_a_memory_hungry_pdf_is_stopped_at_the_ceiling_and_few_read_at_once() -> None:
    settings = Settings.load(env_file=None).attachments
    # two readers at their ceiling beside a worker stay inside its 768 MiB pod
    assert settings.readers * settings.reader_memory_mb <= 400
    reader = PdfReader(seconds=120, memory_mb=settings.reader_memory_mb, at_once=settings.readers)
    hungry = hungry_pdf(400_000)  # pypdf takes ~350 MiB for it
    assert len(hungry) < 16 * 1024
    sentences, _, peak = await watch(asyncio.ensure_future(read(reader, "eat.pdf", hungry)))
    assert sentences == TOO_MUCH.format(name="eat.pdf")
    assert 0 < peak <= settings.reader_memory_mb * MIB

    # slow ones sent at once wait for a free reader (each killed after `seconds` of CPU)
    reader = PdfReader(seconds=1, memory_mb=settings.reader_memory_mb, at_once=settings.readers)
    slow = slow_pdf(10_000)
    reads = asyncio.gather(*(read(reader, f"slow{i}.pdf", slow) for i in range(3)))
    sentences, most, _ = await watch(reads)
    assert all("took too long to read" in sentence for sentence in sentences)
    assert most == settings.readers

    # and an ordinary PDF still reads under the ceiling
    text, pages = await reader.read("fine.pdf", pdf("x marks the spot " * 200), 40_000)
    assert "x marks the spot" in text and pages == 1


async def test_the_time_limit_is_for_reading_not_for_starting_the_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded machine starts Python and loads pypdf slowly: a small PDF whose reader took
    longer than the limit to start is still read, not called too slow to read."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(2)\n")  # a slow start
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reader = PdfReader(seconds=1.5)
    text, pages = await reader.read("fine.pdf", pdf("x marks the spot"), 40_000)
    assert "x marks the spot" in text and pages == 1


async def test_the_time_limit_is_the_readers_cpu_time_not_the_wait_for_a_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine a reader waits for a core: a small PDF whose reader got no CPU for
    longer than the limit is still read; a PDF that needs more CPU than the limit is not."""
    waits = "import sys, time\n"
    waits += "class Slow:\n"
    waits += "    def __init__(self, raw): self.raw = raw\n"
    waits += "    def read(self): time.sleep(3); return self.raw.read()\n"  # no CPU
    waits += "class In:\n    buffer = Slow(sys.stdin.buffer)\n"
    waits += "sys.stdin = In()\n"
    (tmp_path / "sitecustomize.py").write_text(waits)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reader = PdfReader(seconds=1.5)
    started = time.monotonic()
    text, pages = await reader.read("fine.pdf", pdf("x marks the spot"), 40_000)
    assert time.monotonic() - started > 3  # longer than the limit in wall time
    assert "x marks the spot" in text and pages == 1
    monkeypatch.delenv("PYTHONPATH")
    sentence = await read(PdfReader(seconds=1.5), "slow.pdf", slow_pdf(10_000))
    assert sentence == "slow.pdf took too long to read (over 1.5 seconds), so I left it unread."
