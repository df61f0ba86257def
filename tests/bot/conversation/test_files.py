"""Images and documents turned into what the model gets: limits, scaling, truncation."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from adapters.base import Actor, Attachment, ContextMessage, ConversationKey, InboundMessage
from bot.conversation.attachments import Gatherer
from bot.conversation.documents import Unsupported, read_text
from bot.conversation.images import MAX_BYTES, SCALED_SIDE, BadImage, fit_image, is_image
from tests.adapters.samples import jpeg, png


def encoded(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_supported_images_within_limits_pass_byte_for_byte(fmt: str) -> None:
    data = encoded(Image.new("RGB", (120, 80), (1, 2, 3)), fmt)
    fitted = fit_image(data)
    assert fitted.data == data and not fitted.scaled
    assert (fitted.width, fitted.height) == (120, 80)
    assert fitted.media_type == f"image/{'jpeg' if fmt == 'JPEG' else fmt.lower()}"
    assert is_image(data[:16])


def test_an_image_over_the_side_limit_is_scaled_to_the_sweet_spot() -> None:
    fitted = fit_image(jpeg(9000, 300))
    assert fitted.scaled and fitted.width == SCALED_SIDE and fitted.media_type == "image/jpeg"
    assert Image.open(io.BytesIO(fitted.data)).size == (SCALED_SIDE, 52)


def test_an_image_over_the_byte_limit_is_scaled_and_transparency_kept() -> None:
    noisy = Image.effect_noise((1800, 1800), 100).convert("RGBA")
    data = encoded(noisy, "PNG")
    assert len(data) > MAX_BYTES
    fitted = fit_image(data)
    assert fitted.scaled and fitted.media_type == "image/png"
    assert max(fitted.width, fitted.height) == SCALED_SIDE and len(fitted.data) < len(data)


def test_unsupported_and_damaged_images_are_refused() -> None:
    with pytest.raises(BadImage):
        fit_image(encoded(Image.new("RGB", (10, 10)), "BMP"))
    with pytest.raises(BadImage):
        fit_image(png(200, 200)[:60])  # cut short
    with pytest.raises(BadImage):
        fit_image(b"not an image at all")


def test_text_is_decoded_and_binary_refused() -> None:
    assert read_text("a.txt", "héllo".encode()) == "héllo"
    assert read_text("a.txt", "caf\xe9".encode("cp1252")) == "café"
    with pytest.raises(Unsupported):
        read_text("a.bin", b"\x00\x01\x02")


async def test_a_long_document_keeps_its_start_and_says_it_was_cut() -> None:
    class Files:  # a ConversationSource over bytes in memory
        async def download(self, attachment: Attachment, limit: int) -> bytes:
            return ("line of the log\n" * 2000).encode()

        async def thread_history(
            self, conversation: ConversationKey, before: str
        ) -> list[ContextMessage]:
            return []

    event = InboundMessage(
        event_id="x",
        conversation=ConversationKey(platform="telegram", chat_id="1"),
        actor=Actor(platform="telegram", user_id="1"),
        text="what happened?",
        is_direct=True,
        attachments=(Attachment(ref="f", name="app.log", mime_type="text/plain"),),
    )
    gathered = await Gatherer(file_tokens=100).gather(event, Files(), following=False)
    [block] = gathered.blocks
    text = block.text  # type: ignore[union-attr]
    assert "line of the log" in text
    assert "[Only the first 400 of 32000 characters of app.log are shown" in text
    assert text.count("line of the log") == 400 // len("line of the log\n")
