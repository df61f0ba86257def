"""Images for the model: checked with Pillow, passed on byte for byte when within limits.

The limits are Anthropic's, the stricter provider: 8000 px on the longest side and 5 MB per
image (of base64, so 3.75 MB of file). Only an image over one of them is scaled down, to
1568 px, the size Anthropic would reduce it to anyway. Pillow works in a thread: decoding a
large photo takes long enough to stall the event loop. What is decoded is bounded in pixels,
read from the header first, so a few kilobytes that claim 20000 × 20000 pixels cost nothing;
a large JPEG is decoded at a fraction of its size (libjpeg's draft mode) instead.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
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


def fit_image(data: bytes) -> FittedImage:
    """The image as the model should get it; raises BadImage."""
    from PIL import Image, UnidentifiedImageError  # loaded with the first image (~5 MB)

    try:
        with Image.open(io.BytesIO(data)) as image:
            media_type = FORMATS.get(image.format or "")
            if media_type is None:
                raise BadImage(f"unsupported format {image.format}")
            width, height = image.size
            fits = max(width, height) <= MAX_SIDE and len(data) <= MAX_BYTES
            if image.format == "JPEG" and (not fits or width * height > MAX_PIXELS):
                image.draft(None, (SCALED_SIDE, SCALED_SIDE))  # decode at 1/2 … 1/8 scale
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
