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
