"""How long a recording really is, measured from its bytes rather than taken from what the
sender declared (a Telegram client or a Slack file says what it likes).

Ogg Opus (every Telegram voice note): the sum of the audio packets' durations, each read from
its TOC byte (RFC 6716 §3.1), which is what a decoder will play whatever the pages' granule
positions claim. WAV: the data chunk's bytes (those present) over the byte rate. MP4 / M4A
(Telegram video notes, Slack clips): the longest track's sample table (`stts`: what a decoder
plays) over its time scale, not the header's stated duration. Anything else, or a file these
cannot read, is not measured (None); its declared duration stands.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

# Frame length in ms by TOC configuration: SILK (0-11), hybrid (12-15), CELT (16-31).
_FRAME_MS: list[float] = [(10, 20, 40, 60)[c % 4] for c in range(12)]
_FRAME_MS += [(10, 20)[c % 2] for c in range(12, 16)]
_FRAME_MS += [(2.5, 5, 10, 20)[c % 4] for c in range(16, 32)]


def measured_seconds(data: bytes, stop_after: float) -> float | None:
    """The recording's length in seconds (counting stops past `stop_after`), or None."""
    if data.startswith(b"OggS"):
        return _opus_seconds(data, stop_after)
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return _wav_seconds(data)
    if data[4:8] == b"ftyp":
        return _mp4_seconds(data)
    return None


class _NotOgg(Exception):
    pass


def _ogg_packets(data: bytes) -> Iterator[bytes]:
    """The first bytes (up to 8: the TOC, or a header's magic) of each packet of an Ogg
    stream's pages, one at a time; _NotOgg where it is not one."""
    partial = b""
    at = 0
    while at < len(data):
        if data[at : at + 4] != b"OggS" or at + 27 > len(data):
            raise _NotOgg
        count = data[at + 26]
        table = data[at + 27 : at + 27 + count]
        if len(table) < count:
            raise _NotOgg
        at += 27 + count
        for size in table:
            if len(partial) < 8:
                partial += data[at : at + min(size, 8 - len(partial))]
            at += size
            if size < 255:  # a packet ends on a segment shorter than 255
                yield partial
                partial = b""
        if at > len(data):
            raise _NotOgg


def _opus_seconds(data: bytes, stop_after: float) -> float | None:
    packets = _ogg_packets(data)
    try:
        if not next(packets, b"").startswith(b"OpusHead"):
            return None  # Vorbis, Speex, FLAC in Ogg: not measured here
        next(packets, None)  # OpusTags
        total_ms = 0.0
        for packet in packets:
            if not packet:  # no audio, but counted: a stream of them must end the count too
                total_ms += 2.5
                continue
            toc, code = packet[0], packet[0] & 3
            if code == 0:
                frames = 1
            elif code in (1, 2):
                frames = 2
            else:
                frames = packet[1] & 0x3F if len(packet) > 1 else 0
            total_ms += _FRAME_MS[toc >> 3] * frames
            if total_ms / 1000 > stop_after:
                break
    except _NotOgg:
        return None
    return total_ms / 1000


def _wav_seconds(data: bytes) -> float | None:
    at, byte_rate = 12, 0
    while at + 8 <= len(data):
        kind, size = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
        body = at + 8
        if kind == b"fmt " and size >= 16:
            byte_rate = struct.unpack("<I", data[body + 8 : body + 12])[0]
        elif kind == b"data":
            present = min(size, len(data) - body)
            return present / byte_rate if byte_rate else None
        at = body + size + (size & 1)
    return None


MP4_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl"}


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, body start, body end) of each box between start and end."""
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        head = 8
        if size == 1 and at + 16 <= end:
            size, head = struct.unpack(">Q", data[at + 8 : at + 16])[0], 16
        elif size == 0:
            size = end - at
        if size < head or at + size > end:
            return
        yield kind, at + head, at + size
        at += size


def _mp4_seconds(data: bytes) -> float | None:
    longest: float | None = None
    for kind, start, end in _boxes(data, 0, len(data)):
        if kind != b"moov":
            continue
        for trak, t_start, t_end in _boxes(data, start, end):
            if trak == b"trak":
                seconds = _track_seconds(data, t_start, t_end)
                if seconds is not None:
                    longest = max(longest or 0.0, seconds)
    return longest


def _track_seconds(data: bytes, start: int, end: int) -> float | None:
    """A track's played length: the sum of its `stts` sample durations over `mdhd`'s scale."""
    scale, ticks = 0, None
    stack = [(start, end)]
    while stack:
        begin, stop = stack.pop()
        for kind, body, body_end in _boxes(data, begin, stop):
            if kind in MP4_CONTAINERS:
                stack.append((body, body_end))
            elif kind == b"mdhd" and body_end - body >= 24:
                version = data[body]
                offset = body + (20 if version == 1 else 12)
                scale = struct.unpack(">I", data[offset : offset + 4])[0]
            elif kind == b"stts" and body_end - body >= 8:
                count = struct.unpack(">I", data[body + 4 : body + 8])[0]
                entries = min(count, (body_end - body - 8) // 8)
                ticks = 0
                for n in range(entries):
                    at = body + 8 + 8 * n
                    samples, delta = struct.unpack(">II", data[at : at + 8])
                    ticks += samples * delta
    if not scale or ticks is None:
        return None
    return ticks / scale
