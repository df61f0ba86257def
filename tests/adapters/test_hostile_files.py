"""Files built to hurt: a decompression-bomb PNG and a PDF that takes minutes to read, sent to
the real runtime through a fake Telegram. Each gets one sentence in bounded time and memory,
and the next message is answered."""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.config import Settings
from bot.conversation.images import MAX_PIXELS
from tests.adapters.samples import pdf
from tests.adapters.test_telegram import ANA, adapter_for
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import Harness, running
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


def slow_pdf(operators: int) -> bytes:
    """One page whose compressed content stream holds `operators` text moves and shows."""
    return page_pdf(b"BT /F1 12 Tf " + b"0 -1 Td (ab) Tj " * operators + b"ET")


def page_pdf(stream: bytes) -> bytes:
    """One page with `stream` as its (compressed) content."""
    content = zlib.compress(stream, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
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


@contextlib.asynccontextmanager
async def parley(
    redis: aioredis.Redis, fake: FakeTelegram, model: ScriptedModel, **attachments: object
) -> AsyncIterator[Harness]:
    adapter = adapter_for(fake)
    config = Settings.load(env_file=None, attachments=attachments)
    async with running(redis, model, adapter=adapter, config=config) as harness:  # type: ignore[arg-type]
        adapter.handler = harness.runtime.inbox.submit
        await adapter.start()
        await adapter.start_polling()
        try:
            yield harness
        finally:
            await adapter.stop()


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
    async with parley(redis, telegram, model) as harness:
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
    slow = slow_pdf(2_000_000)  # ~70 s of pypdf on an idle core
    assert len(slow) < 200 * 1024
    model = ScriptedModel([reply("Here: x."), reply("Still here.")])
    async with parley(redis, telegram, model, PARLEY_PDF_TIMEOUT=3) as harness:
        file_id = telegram.add_file(slow, path="documents/slow.pdf")
        started = time.monotonic()
        document = {"file_id": file_id, "file_name": "slow.pdf", "mime_type": "application/pdf"}
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, document=document))
        await until(lambda: bool(pdf_readers()))
        # the process that parses untrusted files gets no secrets from the environment
        environ = environment_of(pdf_readers()[0])
        assert b"sk-ant-not-for-pdf-readers" not in environ and b"PATH=" in environ
        await until(lambda: len(telegram.chat(ANA)) == 1)
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
    assert 3 <= took < 20
