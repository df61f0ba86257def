"""Recordings measured by their frames: MP3 (MPEG audio) and FLAC.

MP3: every frame header present (after an ID3v2 tag) counts its samples at its sample rate;
a Xing/VBRI header's frame count, an ID3 length or the sender's word are claims and are not
read. FLAC: every frame header whose CRC-8 checks counts its block size at the stream's
sample rate; STREAMINFO's total is a claim. Bytes between frames are skipped a byte at a
time, so padding or garbage cannot hide frames after it.
"""

from __future__ import annotations

# kbps by (MPEG-1?, layer) and bitrate index 1..14
_BITRATES = {
    (True, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_BITRATES[(False, 3)] = _BITRATES[(False, 2)]
_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}

# Opus frame length in ms by TOC configuration: SILK (0-11), hybrid (12-15), CELT (16-31).
_OPUS_MS: list[float] = [(10, 20, 40, 60)[c % 4] for c in range(12)]
_OPUS_MS += [(10, 20)[c % 2] for c in range(12, 16)]
_OPUS_MS += [(2.5, 5, 10, 20)[c % 4] for c in range(16, 32)]
OPUS_MOST_MS = 120.0  # the longest an Opus packet may play


def opus_packet_ms(packet: bytes) -> float:
    """What one Opus packet plays, from its TOC byte (RFC 6716 §3.1); an empty one counts
    2.5 ms, so a stream of them ends a count too."""
    if not packet:
        return 2.5
    toc, code = packet[0], packet[0] & 3
    if code == 0:
        frames = 1
    elif code in (1, 2):
        frames = 2
    else:
        frames = packet[1] & 0x3F if len(packet) > 1 else 0
    return _OPUS_MS[toc >> 3] * frames


SNIFF = 64 * 1024  # bytes searched for two frames in a row, past any junk before them


def looks_mp3(data: bytes) -> bool:
    if data.startswith(b"ID3"):
        return True
    for at in range(min(len(data), SNIFF)):
        frame = _mpeg_frame(data, at)
        if frame is not None and _mpeg_frame(data, at + frame[0]) is not None:
            return True
    return False


def mp3_seconds(data: bytes, stop_after: float) -> float | None:
    at = 0
    if data.startswith(b"ID3") and len(data) >= 10:
        size = 0
        for byte in data[6:10]:  # syncsafe: seven bits a byte
            size = (size << 7) | (byte & 0x7F)
        at = 10 + size + (10 if data[5] & 0x10 else 0)  # a footer follows the tag
    seconds, frames = 0.0, 0
    while at + 4 <= len(data):
        frame = _mpeg_frame(data, at)
        if frame is None:
            at = data.find(b"\xff", at + 1)  # the next possible frame
            if at < 0:
                break
            continue
        length, samples, rate = frame
        seconds += samples / rate
        frames += 1
        at += length
        if seconds > stop_after:
            break
    return seconds if frames else None


def _mpeg_frame(data: bytes, at: int) -> tuple[int, int, int] | None:
    """(length in bytes, samples, sample rate) of the frame header at `at`, or None."""
    if at + 4 > len(data) or data[at] != 0xFF or data[at + 1] & 0xE0 != 0xE0:
        return None
    version, layer_bits = (data[at + 1] >> 3) & 3, (data[at + 1] >> 1) & 3
    bitrate_index, rate_index = data[at + 2] >> 4, (data[at + 2] >> 2) & 3
    if version == 1 or layer_bits == 0 or bitrate_index in (0, 15) or rate_index == 3:
        return None  # reserved, or free format (no length to step by)
    layer, mpeg1 = 4 - layer_bits, version == 3
    bitrate = _BITRATES[(mpeg1, layer)][bitrate_index - 1] * 1000
    rate = _RATES[version][rate_index]
    padding = (data[at + 2] >> 1) & 1
    if layer == 1:
        return (12 * bitrate // rate + padding) * 4, 384, rate
    samples = 1152 if layer == 2 or mpeg1 else 576
    return samples // 8 * bitrate // rate + padding, samples, rate


def flac_seconds(data: bytes, stop_after: float) -> float | None:
    at, rate, min_frame, last = 4, 0, 0, False
    while not last:  # the metadata blocks
        if at + 4 > len(data):
            return None
        last, kind = bool(data[at] & 0x80), data[at] & 0x7F
        size = int.from_bytes(data[at + 1 : at + 4], "big")
        body = data[at + 4 : at + 4 + size]
        if kind == 0 and len(body) >= 18:  # STREAMINFO
            min_frame = int.from_bytes(body[4:7], "big")
            rate = int.from_bytes(body[10:13], "big") >> 4
        at += 4 + size
    if not rate:
        return None
    samples = 0
    while at + 6 <= len(data):
        frame = _flac_frame(data, at) if data[at] == 0xFF else None
        if frame is None:
            at = data.find(b"\xff", at + 1)  # the next possible frame
            if at < 0:
                break
            continue
        header, block = frame
        samples += block
        at += max(header, min_frame)
        if samples / rate > stop_after:
            break
    return samples / rate


_BLOCKS = {1: 192, 2: 576, 3: 1152, 4: 2304, 5: 4608}


def _flac_frame(data: bytes, at: int) -> tuple[int, int] | None:
    """(header length, block size) of a FLAC frame header at `at` whose CRC-8 checks."""
    if data[at + 1] & 0xFE != 0xF8 or data[at + 3] & 1:
        return None
    code, rate_code = data[at + 2] >> 4, data[at + 2] & 0x0F
    if code == 0 or rate_code == 15:
        return None
    end = at + 4
    first = data[end]  # the frame or sample number, coded as UTF-8 is
    extra = 0
    while extra < 7 and first & (0x80 >> extra):
        extra += 1
    if extra == 1 or extra > 7:
        return None
    end += max(extra, 1)
    block = _BLOCKS.get(code, 256 << (code - 8) if code >= 8 else 0)
    if code in (6, 7):
        width = 1 if code == 6 else 2
        block = int.from_bytes(data[end : end + width], "big") + 1
        end += width
    end += {12: 1, 13: 2, 14: 2}.get(rate_code, 0)
    if end >= len(data) or _crc8(data[at:end]) != data[end]:
        return None
    return end + 1 - at, block


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc
