"""Run as `python -m tests.bot.decode_many N`: one worker's Gatherer reads N messages at
once, each with a 40-megapixel PNG, and prints how far the process's peak memory (RSS) rose
above what it held before, in MiB. A child process, so the peak is this work's alone."""

from __future__ import annotations

import asyncio
import resource
import struct
import sys
import zlib

from adapters.base import Actor, Attachment, ContextMessage, ConversationKey, InboundMessage
from bot.conversation.attachments import Gatherer

WIDTH, HEIGHT = 8000, 5000  # 40 megapixels: 120 MB of RGB once decoded


def png(width: int, height: int) -> bytes:
    """A PNG written row by row (never whole in memory): a few hundred kilobytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    packer = zlib.compressobj(9)
    row = b"\x00" + bytes([90, 160, 220]) * width
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


class Source:
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def download(self, attachment: Attachment, limit: int) -> bytes:
        return self.data

    async def thread_history(
        self, conversation: ConversationKey, before: str, after: str | None = None
    ) -> list[ContextMessage]:
        return []


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(count: int) -> None:
    data = png(WIDTH, HEIGHT)

    gatherer = Gatherer(max_bytes=len(data) + 1)  # one per worker process, as the runtime's
    small = png(64, 64)
    warm = InboundMessage(
        event_id="warm",
        conversation=ConversationKey(platform="telegram", chat_id="1"),
        actor=Actor(platform="telegram", user_id="1", name="Ana"),
        text="?",
        is_direct=True,
        attachments=(Attachment(ref="f", name="warm.png", mime_type="image/png"),),
    )
    await gatherer.gather(warm, Source(small), following=False)  # Pillow and threads loaded
    before = peak_mib()
    events = [
        InboundMessage(
            event_id=f"e{n}",
            conversation=ConversationKey(platform="telegram", chat_id=str(n)),
            actor=Actor(platform="telegram", user_id=str(n), name="Ana"),
            text="what is in this photo?",
            is_direct=True,
            attachments=(Attachment(ref="f", name=f"photo{n}.png", mime_type="image/png"),),
        )
        for n in range(count)
    ]
    done = await asyncio.gather(
        *(gatherer.gather(e, Source(data), following=False) for e in events)
    )
    assert all(len(g.blocks) == 2 and not g.notes for g in done), [g.notes for g in done]
    print(f"{peak_mib() - before:.0f} {peak_mib():.0f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
