"""How long a recording really is, measured from its bytes rather than taken from what the
sender declared (a Telegram client or a Slack file says what it likes).

Ogg Opus (every Telegram voice note): the sum of the audio packets' durations, each read from
its TOC byte (RFC 6716 §3.1), which is what a decoder will play whatever the pages' granule
positions claim. WAV: the data chunk's bytes (those present) over the byte rate. MP4 / M4A
(Telegram video notes, Slack clips): the longest track's sample table (`stts`: what a decoder
plays) over its time scale, not the header's stated duration. MP3 and FLAC: their frames
(`audio_frames.py`); WebM: its Opus blocks (`audio_webm.py`). Ogg Vorbis: each audio
packet's block size from its mode (the setup header's modes, read from its end). Anything
else, or a file these cannot read, is not measured (None); its declared duration stands.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from bot.conversation.audio_frames import flac_seconds, looks_mp3, mp3_seconds, opus_packet_ms
from bot.conversation.audio_webm import webm_seconds


def measured_seconds(data: bytes, stop_after: float) -> float | None:
    """The recording's length in seconds (counting stops past `stop_after`), or None."""
    if data.startswith(b"OggS"):
        return _opus_seconds(data, stop_after)
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return _wav_seconds(data)
    if data[4:8] == b"ftyp":
        return _mp4_seconds(data)
    if data.startswith(b"fLaC"):
        return flac_seconds(data, stop_after)
    if data.startswith(b"\x1a\x45\xdf\xa3"):  # EBML: WebM / Matroska
        return webm_seconds(data, stop_after)
    if looks_mp3(data):
        return mp3_seconds(data, stop_after)
    return None


class _NotOgg(Exception):
    pass


def _ogg_packets(data: bytes, keep: int = 8) -> Iterator[bytes]:
    """The first bytes (up to `keep`: the TOC, or a header's magic) of each packet of an Ogg
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
            if len(partial) < keep:
                partial += data[at : at + min(size, keep - len(partial))]
            at += size
            if size < 255:  # a packet ends on a segment shorter than 255
                yield partial
                partial = b""
        if at > len(data):
            raise _NotOgg


def _opus_seconds(data: bytes, stop_after: float) -> float | None:
    packets = _ogg_packets(data)
    try:
        first = next(packets, b"")
        if first.startswith(b"\x01vorbis"):
            return _vorbis_seconds(data, stop_after)
        if not first.startswith(b"OpusHead"):
            return None  # Speex, FLAC in Ogg: not measured here
        next(packets, None)  # OpusTags
        total_ms = 0.0
        for packet in packets:
            total_ms += opus_packet_ms(packet)
            if total_ms / 1000 > stop_after:
                break
    except _NotOgg:
        return None
    return total_ms / 1000


def _vorbis_seconds(data: bytes, stop_after: float) -> float | None:
    """Each audio packet plays a quarter of the previous block and of its own (Vorbis I
    §1.3.2), its block long or short as its mode says."""
    packets = _ogg_packets(data, keep=len(data))
    ident, _, setup = next(packets, b""), next(packets, b""), next(packets, b"")
    if len(ident) < 30 or not setup.startswith(b"\x05vorbis"):
        return None
    rate = struct.unpack("<I", ident[12:16])[0]
    short, long = 1 << (ident[28] & 0x0F), 1 << (ident[28] >> 4)
    flags = _vorbis_modes(setup)
    if not rate or not flags:
        return None
    bits = (len(flags) - 1).bit_length()
    samples, previous = 0, 0
    for packet in packets:
        if not packet or packet[0] & 1:
            continue  # not an audio packet
        mode = (packet[0] >> 1) & ((1 << bits) - 1)
        if mode >= len(flags):
            continue  # a decoder drops it
        size = long if flags[mode] else short
        samples += (previous + size) // 4 if previous else 0
        previous = size
        if samples / rate > stop_after:
            break
    return samples / rate


def _vorbis_modes(setup: bytes) -> list[bool] | None:
    """Each mode's block flag, read from the setup header's end as FFmpeg's parser does: the
    framing bit, then modes (8-bit mapping, 16-bit window and transform, both 0, the flag)
    backwards while they look like modes, the count being where the 6-bit count matches."""
    tail = setup[-4096:]  # the modes, at most 64 of 41 bits, are at the very end
    bits = [(tail[i >> 3] >> (i & 7)) & 1 for i in range(len(tail) * 8)][::-1]

    def read(at: int, width: int) -> int:
        return int("".join(map(str, bits[at : at + width])) or "0", 2)

    start = next((i + 1 for i, bit in enumerate(bits[: len(bits) - 97]) if bit), None)
    if start is None:
        return None
    at, count, modes = start, 0, 0
    while len(bits) - at >= 97 and count < 64:
        if read(at, 8) > 63 or read(at + 8, 16) or read(at + 24, 16):
            break
        at, count = at + 41, count + 1
        if read(at, 6) + 1 == count:
            modes = count
    # the modes were written first to last: backwards, the last mode comes first
    return [bool(bits[start + 41 * n + 40]) for n in range(modes)][::-1] or None


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
