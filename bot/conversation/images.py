"""Images for the model: checked with Pillow, passed on byte for byte when within limits.

The limits are Anthropic's, the stricter provider: 8000 px on the longest side and 5 MB per
image (of base64, so 3.75 MB of file). Only an image over one of them is scaled down, to
1568 px, the size Anthropic would reduce it to anyway. Pillow works in a thread: decoding a
large photo takes long enough to stall the event loop. What is decoded is bounded in pixels,
read from the header first, so a few kilobytes that claim 20000 × 20000 pixels cost nothing;
a large JPEG is decoded at a fraction of its size (libjpeg's draft mode) instead.

Decoding is also bounded across images: `ImageDecoder` lets at most `at_once` decode at a
time in a process and, together, at most `pixel_budget` decoded pixels (a 40-megapixel PNG
is 120 MB or more while it decodes; eight at once went past a pod's memory limit). The
pixels an image will decode to are read from its header before it waits for its turn.
"""

from __future__ import annotations

import asyncio
import io
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.messages import ImageType

if TYPE_CHECKING:
    from PIL.Image import Image as PilImage

FORMATS: dict[str, ImageType] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}
MAX_SIDE = 8000
MAX_BYTES = 5 * 1024 * 1024 * 3 // 4
SCALED_SIDE = 1568
MAX_PIXELS = 40_000_000  # decoded at most: ~160 MB as RGBA


class BadImage(Exception):
    """Not an image Parley can pass on: unknown format, damaged, or absurdly large."""


class TooManyPixels(BadImage):
    """More pixels than MAX_PIXELS, whatever the file's size."""


@dataclass(frozen=True, kw_only=True)
class FittedImage:
    data: bytes
    media_type: ImageType
    width: int
    height: int
    scaled: bool = False


def is_image(head: bytes) -> bool:
    """Whether the first bytes of a file are those of a PNG, JPEG, GIF or WebP image."""
    return head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    )


def decoded_pixels(data: bytes) -> int:
    """How many pixels `fit_image` will decode `data` to (the header only; at least 1)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            _draft(image, data)
            return max(1, min(image.width * image.height, MAX_PIXELS))
    except Exception:  # fit_image says what is wrong with it; it decodes nothing then
        return 1


def _draft(image: PilImage, data: bytes) -> bool:
    """Set a large JPEG to decode at a fraction of its size; whether it fits unscaled."""
    width, height = image.size
    fits = max(width, height) <= MAX_SIDE and len(data) <= MAX_BYTES
    if image.format == "JPEG" and (not fits or width * height > MAX_PIXELS):
        image.draft(None, (SCALED_SIDE, SCALED_SIDE))  # decode at 1/2 … 1/8 scale
    return fits


@dataclass(kw_only=True)
class ImageDecoder:
    """Decodes images in threads, `at_once` at a time and within `pixel_budget` decoded
    pixels together (an image alone may always use the whole budget). Its own threads: the
    memory a decode frees stays with its thread's malloc arena, and is reused by the next
    decode only on the same thread (on the shared pool, eight 40-megapixel PNGs one after
    another still grew the process by 420 MiB; here by one decode's worth)."""

    at_once: int = 2
    pixel_budget: int = MAX_PIXELS
    _slots: asyncio.Semaphore = field(init=False, repr=False)
    _freed: asyncio.Condition = field(init=False, repr=False)
    _threads: ThreadPoolExecutor = field(init=False, repr=False)
    _in_use: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.at_once)
        self._freed = asyncio.Condition()
        self._threads = ThreadPoolExecutor(self.at_once, thread_name_prefix="image")

    async def fit(self, data: bytes) -> FittedImage:
        """`fit_image` in a thread once its pixels fit the budget; raises BadImage."""
        loop = asyncio.get_running_loop()
        pixels = await loop.run_in_executor(self._threads, decoded_pixels, data)
        pixels = min(pixels, self.pixel_budget)
        async with self._slots:
            async with self._freed:
                await self._freed.wait_for(lambda: self._in_use + pixels <= self.pixel_budget)
                self._in_use += pixels
            try:
                return await loop.run_in_executor(self._threads, fit_image, data)
            finally:
                async with self._freed:
                    self._in_use -= pixels
                    self._freed.notify_all()


def fit_image(data: bytes) -> FittedImage:
    """The image as the model should get it; raises BadImage."""
    from PIL import Image, UnidentifiedImageError  # loaded with the first image (~5 MB)

    try:
        with Image.open(io.BytesIO(data)) as image:
            media_type = FORMATS.get(image.format or "")
            if media_type is None:
                raise BadImage(f"unsupported format {image.format}")
            width, height = image.size
            fits = _draft(image, data)
            if image.width * image.height > MAX_PIXELS:
                raise TooManyPixels(f"{width}x{height}")
            image.load()  # a damaged file fails here, not at the provider
            if fits:
                return FittedImage(data=data, media_type=media_type, width=width, height=height)
            return _scaled(image)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's own guard on opening, past twice its limit (below that a warning, which
        # is an error where warnings are): only the header was read.
        raise TooManyPixels(type(exc).__name__) from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise BadImage(type(exc).__name__) from exc


def _scaled(image: PilImage) -> FittedImage:
    image.thumbnail((SCALED_SIDE, SCALED_SIDE))
    out = io.BytesIO()
    if image.mode in ("RGBA", "LA", "P", "PA") or "transparency" in image.info:
        image.save(out, format="PNG", optimize=True)
        media_type: ImageType = "image/png"
    else:
        image.convert("RGB").save(out, format="JPEG", quality=85)
        media_type = "image/jpeg"
    return FittedImage(
        data=out.getvalue(),
        media_type=media_type,
        width=image.width,
        height=image.height,
        scaled=True,
    )
