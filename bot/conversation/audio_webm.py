"""A WebM recording (a browser's or Slack's clip) measured by its Opus blocks.

Each block of an Opus track plays what its packet's TOC byte says, whatever the Segment's
`Duration` or the blocks' timecodes claim. A laced block (several packets in one) counts
each packet at the longest an Opus packet can play. Segments and clusters of unknown size
(as a live recorder writes them) are read through. No Opus track: not measured (None).
"""

from __future__ import annotations

from bot.conversation.audio_frames import OPUS_MOST_MS, opus_packet_ms

_SEGMENT, _CLUSTER, _BLOCK_GROUP = 0x18538067, 0x1F43B675, 0xA0
_TRACKS, _TRACK_ENTRY, _TRACK_NUMBER, _CODEC_ID = 0x1654AE6B, 0xAE, 0xD7, 0x86
_SIMPLE_BLOCK, _BLOCK = 0xA3, 0xA1
_ENTERED = {_SEGMENT, _CLUSTER, _BLOCK_GROUP, _TRACKS, _TRACK_ENTRY}


def _vint(data: bytes, at: int, keep_marker: bool) -> tuple[int, int] | None:
    """(value, length) of the EBML variable-length integer at `at`; None if there is none.
    An all-ones size ("unknown") is -1."""
    if at >= len(data) or data[at] == 0:
        return None
    length = 9 - data[at].bit_length()
    if at + length > len(data):
        return None
    value = int.from_bytes(data[at : at + length], "big")
    if keep_marker:
        return value, length
    value &= (1 << (7 * length)) - 1
    return (-1 if value == (1 << (7 * length)) - 1 else value), length


def webm_seconds(data: bytes, stop_after: float) -> float | None:
    at, total_ms = 0, 0.0
    opus: set[int] = set()
    entry: dict[int, int | bytes] = {}
    while at < len(data):
        element = _vint(data, at, keep_marker=True)
        size = _vint(data, at + element[1], keep_marker=False) if element else None
        if element is None or size is None:
            break  # cut short: what was read counts
        kind, body = element[0], at + element[1] + size[1]
        if kind in _ENTERED:
            if kind == _TRACK_ENTRY:
                entry = {}
            at = body
            continue
        if size[0] < 0:
            return None  # an unknown size on an element that is not read through
        content = data[body : body + size[0]]
        if kind in (_TRACK_NUMBER, _CODEC_ID):
            entry[kind] = int.from_bytes(content, "big") if kind == _TRACK_NUMBER else content
            if entry.get(_CODEC_ID) == b"A_OPUS" and isinstance(entry.get(_TRACK_NUMBER), int):
                opus.add(int(entry[_TRACK_NUMBER]))
        elif kind in (_SIMPLE_BLOCK, _BLOCK):
            total_ms += _block_ms(content, opus)
            if total_ms / 1000 > stop_after:
                break
        at = body + size[0]
    return total_ms / 1000 if opus else None


def _block_ms(block: bytes, opus: set[int]) -> float:
    track = _vint(block, 0, keep_marker=False)
    if track is None or track[0] not in opus or len(block) < track[1] + 3:
        return 0.0
    start = track[1] + 3  # the track, a 16-bit timecode, the flags
    lacing = (block[track[1] + 2] >> 1) & 3
    if lacing == 0:
        return opus_packet_ms(block[start:])
    count = block[start] + 1 if start < len(block) else 1
    return count * OPUS_MOST_MS
