"""Files built to hurt: a decompression-bomb PNG and a PDF that takes minutes to read, sent to
the real runtime through a fake Telegram. Each gets one sentence in bounded time and memory,
and the next message is answered."""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.config import Settings
from bot.conversation.images import MAX_PIXELS
from bot.conversation.pdf_process import STARTUP_SECONDS, WALL_FACTOR
from tests.adapters.samples import pdf
from tests.adapters.test_telegram import ANA, adapter_for
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import parley
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until

ROOT = Path(__file__).resolve().parents[2]


def bomb_png(width: int, height: int, *, rgba: bool = False) -> bytes:
    """A PNG of zeros: a few kilobytes that decode to width × height pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    depth, colour, row_bytes = (8, 6, width * 4) if rgba else (1, 0, (width + 7) // 8)
    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + row_bytes)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    )


def slow_pdf(pages: int) -> bytes:
    """Slow to read in flat memory: one page of 20,000 text moves, listed `pages` times over
    (pypdf takes ~10 ms a page and keeps one page's operators at a time)."""
    return page_pdf(b"BT /F1 12 Tf " + b"0 -1 Td " * 20_000 + b"ET", times=pages)


def hungry_pdf(operators: int) -> bytes:
    """One page whose compressed content stream holds `operators` text moves and shows:
    pypdf holds them all at once, so its memory grows as it reads (~350 MiB for 400,000)."""
    return page_pdf(b"BT /F1 12 Tf " + b"0 -1 Td (ab) Tj " * operators + b"ET")


def page_pdf(stream: bytes, *, times: int = 1) -> bytes:
    """One page with `stream` as its (compressed) content, `times` times in the page tree."""
    content = zlib.compress(stream, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join([b"4 0 R"] * times), times),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def environment_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def pdf_readers() -> list[int]:
    """Child processes of this one that are reading a PDF."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"pdf_process" in command:
            found.append(int(entry.name))
    return found


async def test_a_decompression_bomb_image_is_one_sentence_and_the_next_message_works(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    bomb = bomb_png(20000, 20000)
    assert len(bomb) < 64 * 1024  # 400 million pixels in a few kilobytes
    model = ScriptedModel([reply("Still here.")])
    async with parley(redis, model, chat=adapter_for(telegram), config=files_settings()) as harness:
        file_id = telegram.add_file(bomb, path="documents/bomb.png")
        started = time.monotonic()
        telegram.push(
            telegram.message(
                chat_id=ANA,
                user_id=ANA,
                document={"file_id": file_id, "file_name": "bomb.png", "mime_type": "image/png"},
            )
        )
        await until(lambda: len(telegram.chat(ANA)) == 1)
        took = time.monotonic() - started
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="are you ok?"))
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
    refusal, answer = (p.text for p in telegram.chat(ANA))
    assert refusal == (
        f"bomb.png has too many pixels for me to look at (the limit is "
        f"{MAX_PIXELS // 1_000_000} megapixels); a smaller version would work."
    )
    assert answer == "Still here." and len(model.turn_requests) == 1
    assert took < 15  # the header is read, not the pixels


@pytest.mark.process
def test_an_image_between_pillows_warning_and_its_error_is_refused_in_bounded_memory() -> None:
    # 12000 × 12000 RGBA: Pillow only warns (it errors past twice its limit), and decoding
    # it would take 576 MB. In a child process, with warnings as they are in production.
    # VmHWM is this process's own peak (ru_maxrss would count the parent from before exec)
    script = (
        "import re\n"
        "from tests.adapters.test_hostile_files import bomb_png\n"
        "from bot.conversation.images import TooManyPixels, fit_image\n"
        "data = bomb_png(12000, 12000, rgba=True)\n"
        "try:\n"
        "    fit_image(data)\n"
        "except TooManyPixels:\n"
        "    status = open('/proc/self/status').read()\n"
        "    print('refused', int(re.search(r'VmHWM:\\s+(\\d+)', status)[1]) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    verdict, peak_mb = done.stdout.split()
    assert verdict == "refused"
    assert int(peak_mb) < 150, f"peak RSS {peak_mb} MB"


async def test_a_pdf_too_slow_to_read_is_stopped_and_the_next_message_works(
    redis: aioredis.Redis, telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-pdf-readers")
    slow = slow_pdf(10_000)  # over a minute of pypdf on an idle core, in flat memory
    assert len(slow) < 200 * 1024
    limit = 3
    # what the reader may take: start-up, then `limit` of CPU or, starved of it, 4× in wall time
    promised = STARTUP_SECONDS + WALL_FACTOR * limit
    model = ScriptedModel([reply("Here: x."), reply("Still here.")])
    async with parley(
        redis, model, chat=adapter_for(telegram), config=files_settings(PARLEY_PDF_TIMEOUT=limit)
    ) as harness:
        file_id = telegram.add_file(slow, path="documents/slow.pdf")
        started = time.monotonic()
        document = {"file_id": file_id, "file_name": "slow.pdf", "mime_type": "application/pdf"}
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, document=document))
        await until(lambda: bool(pdf_readers()))
        # the process that parses untrusted files gets no secrets from the environment
        environ = environment_of(pdf_readers()[0])
        assert b"sk-ant-not-for-pdf-readers" not in environ and b"PATH=" in environ
        used = await cpu_until_gone(pdf_readers()[0])
        await until(lambda: len(telegram.chat(ANA)) == 1, within=promised)
        took = time.monotonic() - started
        assert not pdf_readers()  # the reader was killed, not left running
        fine = telegram.add_file(pdf("x marks the spot"), path="documents/fine.pdf")
        document = {"file_id": fine, "file_name": "fine.pdf", "mime_type": "application/pdf"}
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, document=document))
        await until(lambda: len(telegram.chat(ANA)) == 2)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="are you ok?"))
        await until(lambda: len(telegram.chat(ANA)) == 3)
        await harness.settle()
    refusal, summary, answer = (p.text for p in telegram.chat(ANA))
    assert refusal == "slow.pdf took too long to read (over 3 seconds), so I left it unread."
    assert (summary, answer) == ("Here: x.", "Still here.")
    assert "x marks the spot" in model.turn_requests[0].messages[-1].text
    # Stopped by its CPU time (which takes at least as long in wall time: pypdf uses one
    # core) or, starved of a core, by the wall bound; never allowed more than the limit,
    # its start-up (under a second) and the limit's rounding up to whole seconds.
    assert limit <= took < promised
    assert used <= limit + 2, f"the reader used {used:.2f} s of CPU"


async def cpu_until_gone(pid: int) -> float:
    """The most CPU time (user + system, seconds) seen used by process `pid` while it ran."""
    used = 0.0
    while (now := cpu_of(pid)) is not None:
        used = max(used, now)
        await asyncio.sleep(0.05)
    return used


def cpu_of(pid: int) -> float | None:
    """A running process's CPU time so far, in seconds; None once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":  # ended, not yet waited for
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def files_settings(**attachments: object) -> Settings:
    return Settings.load(env_file=None, attachments=attachments)
