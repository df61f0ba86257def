"""Real files for attachment tests: PNG/JPEG images from Pillow, small text PDFs, and Ogg Opus
and WAV recordings of a chosen length."""

from __future__ import annotations

import io
import struct

from PIL import Image
from pypdf import PdfReader, PdfWriter


def png(width: int = 40, height: int = 30, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def jpeg(width: int, height: int, *, noise: bool = False) -> bytes:
    image = Image.effect_noise((width, height), 80).convert("RGB") if noise else None
    image = image or Image.new("RGB", (width, height), (10, 120, 200))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=95)
    return out.getvalue()


def pdf(*pages: str) -> bytes:
    """A PDF with one line of Helvetica text per page, with a correct cross-reference table."""
    count = len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * i} 0 R".encode() for i in range(count))
        + f"] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * index} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def encrypted_pdf(text: str, password: str = "s3cret") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(text))))
    writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def opus_ogg(seconds: float, *, granule: int = 0) -> bytes:
    """An Ogg Opus stream of `seconds` of 60 ms SILK frames (silent, one byte each), its
    pages claiming `granule` samples whatever its length (CRCs left zero: only lengths
    are read from it)."""
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 6) + b"parley" + struct.pack("<I", 0)
    packets = [head, tags] + [bytes([3 << 3, 0])] * round(seconds / 0.06)
    pages = []
    for number, start in enumerate(range(0, len(packets), 200)):
        batch = packets[start : start + 200]
        header = b"OggS" + bytes([0, 2 if number == 0 else 0])
        header += struct.pack("<qIII", granule, 7, number, 0) + bytes([len(batch)])
        pages.append(header + bytes(len(p) for p in batch) + b"".join(batch))
    return b"".join(pages)


def wav(seconds: float, rate: int = 16000) -> bytes:
    """A mono 16-bit PCM WAV file of silence."""
    data = bytes(int(seconds * rate) * 2)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data))
    return b"RIFF" + struct.pack("<I", 4 + len(chunks) + len(data)) + b"WAVE" + chunks + data


def mp4(seconds: float, *, scale: int = 1000, stated: float = 4.0) -> bytes:
    """An MP4 whose one track's sample table plays `seconds` (20 ms samples) while its
    headers state `stated` seconds; no media data (only lengths are read from it)."""

    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + kind + body

    samples, delta = round(seconds * scale / (scale // 50)), scale // 50
    stts = box(b"stts", struct.pack(">IIII", 0, 1, samples, delta))
    mdhd = box(b"mdhd", struct.pack(">IIIIIHH", 0, 0, 0, scale, int(stated * scale), 0, 0))
    mvhd = box(b"mvhd", struct.pack(">IIIII", 0, 0, 0, scale, int(stated * scale)) + bytes(80))
    track = box(b"trak", box(b"mdia", mdhd + box(b"minf", box(b"stbl", stts))))
    return box(b"ftyp", b"M4A \x00\x00\x00\x00") + box(b"moov", mvhd + track)


def mp3(seconds: float, *, claimed_frames: int | None = None) -> bytes:
    """An MPEG-1 Layer III stream (mono, 128 kbps, 44.1 kHz) of `seconds` of silent frames
    (zeroed side info: no main data), after an ID3v2 tag; with `claimed_frames`, its first
    frame is a Xing header claiming that many frames."""
    header = bytes([0xFF, 0xFB, 0x90, 0xC4])
    frame = header + bytes(417 - 4)
    frames = [frame] * round(seconds * 44100 / 1152)
    if claimed_frames is not None:
        xing = b"Xing" + struct.pack(">II", 1, claimed_frames)
        frames[0] = header + bytes(17) + xing + bytes(417 - 4 - 17 - len(xing))
    tag = b"ID3\x04\x00\x00" + bytes([0, 0, 0, 10]) + b"TIT2" + bytes([0, 0, 0, 0, 0, 0])
    return tag + b"".join(frames)


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def _utf8_number(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    if n < 0x800:
        return bytes([0xC0 | n >> 6, 0x80 | n & 0x3F])
    return bytes([0xE0 | n >> 12, 0x80 | (n >> 6) & 0x3F, 0x80 | n & 0x3F])


def flac(seconds: float, *, stated: float | None = None, rate: int = 16000) -> bytes:
    """A FLAC stream (mono, 16-bit) of `seconds` of silence: 4096-sample frames, each one
    CONSTANT subframe, with real header CRC-8 and frame CRC-16; STREAMINFO states `stated`
    seconds (its own length when None)."""
    count = round(seconds * rate / 4096)
    total = round((stated if stated is not None else count * 4096 / rate) * rate)
    info = struct.pack(">HH", 4096, 4096) + bytes(6)  # block sizes; frame sizes unknown
    packed = (rate << 44) | (0 << 41) | (15 << 36) | total  # rate, channels-1, bps-1, samples
    info += packed.to_bytes(8, "big") + bytes(16)  # and no MD5
    out = bytearray(b"fLaC" + bytes([0x80]) + len(info).to_bytes(3, "big") + info)
    for number in range(count):
        head = bytes([0xFF, 0xF8, 0xC0, 0x08]) + _utf8_number(number)
        head += bytes([_crc8(head)])
        body = head + bytes([0x00]) + struct.pack(">h", 0)  # CONSTANT subframe, value 0
        out += body + struct.pack(">H", _crc16(body))
    return bytes(out)


def _ebml(kind: int, body: bytes, *, unknown: bool = False) -> bytes:
    """An EBML element: its id, an 8-byte size (or "unknown", all ones), its body."""
    ident = kind.to_bytes((kind.bit_length() + 7) // 8, "big")
    size = (1 << 56 | ((1 << 56) - 1 if unknown else len(body))).to_bytes(8, "big")
    return ident + size + body


def webm_opus(seconds: float, *, stated: float = 4.0) -> bytes:
    """A WebM file as a browser's recorder writes it (segment and clusters of unknown size)
    with one Opus track of `seconds` of 60 ms SILK packets (one byte each) in SimpleBlocks;
    its Info states `stated` seconds."""
    header = _ebml(0x1A45DFA3, _ebml(0x4282, b"webm"))
    info = _ebml(0x1549A966, _ebml(0x4489, struct.pack(">d", stated * 1000)))
    track = _ebml(0xAE, _ebml(0xD7, b"\x01") + _ebml(0x86, b"A_OPUS") + _ebml(0x83, b"\x02"))
    clusters = bytearray()
    packets = round(seconds / 0.06)
    for first in range(0, packets, 500):  # 30 s a cluster: block timecodes fit 16 bits
        blocks = b"".join(
            _ebml(0xA3, b"\x81" + struct.pack(">h", (n - first) * 60) + b"\x80" + bytes([3 << 3]))
            for n in range(first, min(first + 500, packets))
        )
        clusters += _ebml(
            0x1F43B675, _ebml(0xE7, struct.pack(">I", first * 60)) + blocks, unknown=True
        )
    segment = _ebml(0x18538067, info + _ebml(0x1654AE6B, track) + bytes(clusters), unknown=True)
    return header + segment


class _Bits:
    """Bits packed as Vorbis packs them: least significant first."""

    def __init__(self) -> None:
        self.bits: list[int] = []

    def put(self, value: int, width: int) -> None:
        self.bits += [(value >> n) & 1 for n in range(width)]

    def packed(self) -> bytes:
        padded = self.bits + [0] * (-len(self.bits) % 8)
        return bytes(
            sum(bit << n for n, bit in enumerate(padded[at : at + 8]))
            for at in range(0, len(padded), 8)
        )


def ogg_vorbis(seconds: float, *, granule: int = 0, rate: int = 16000) -> bytes:
    """An Ogg Vorbis stream's headers (short blocks 256, long 2048; two modes, the second
    long, at the setup header's end) and `seconds` of long-block audio packets (1024 samples
    each after the first), its pages claiming `granule` samples whatever its length."""
    ident = b"\x01vorbis" + struct.pack("<IBI", 0, 1, rate) + bytes(12) + bytes([0xB8, 1])
    comments = b"\x03vorbis" + struct.pack("<I", 6) + b"parley" + struct.pack("<I", 0) + b"\x01"
    modes = _Bits()
    modes.put(1, 6)  # two modes
    for flag in (0, 1):
        modes.put(flag, 1), modes.put(0, 16), modes.put(0, 16), modes.put(0, 8)
    modes.put(1, 1)  # framing
    setup = b"\x05vorbis" + bytes(12) + modes.packed()
    packets = [ident, comments, setup] + [bytes([0x02, 0x55])] * (round(seconds * rate / 1024) + 1)
    pages = []
    for number, start in enumerate(range(0, len(packets), 200)):
        batch = packets[start : start + 200]
        head = b"OggS" + bytes([0, 2 if number == 0 else 0])
        head += struct.pack("<qIII", granule, 9, number, 0) + bytes([len(batch)])
        pages.append(head + bytes(len(p) for p in batch) + b"".join(batch))
    return b"".join(pages)
