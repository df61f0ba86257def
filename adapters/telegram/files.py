"""What a Telegram message brings besides its text: photos, documents, the message replied to.

The gateway only records file ids (no download on the update's path); a worker fetches a
file with `getFile` and the file URL when a run needs it. A photo comes in several sizes:
the largest whose declared size is within the limit is taken.
"""

from __future__ import annotations

import datetime as dt
import logging

from telegram import (
    Bot,
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    PhotoSize,
    User,
)
from telegram.error import BadRequest, TelegramError

from adapters.base import Attachment, ContextMessage, DownloadError, FileTooLarge

log = logging.getLogger(__name__)

BOT_API_FILE_LIMIT = 20 * 1024 * 1024  # getFile refuses bigger files on the public Bot API
DOWNLOAD_TIMEOUT = 60.0


def attachments_of(message: Message, limit: int, *, quoted: bool = False) -> list[Attachment]:
    """The message's photo (largest size within `limit`), voice, audio, video note and
    document, as references."""
    found: list[Attachment] = []
    if message.photo:
        photo = _largest_within(message.photo, limit)
        found.append(
            Attachment(
                ref=photo.file_id,
                name="photo.jpg",
                mime_type="image/jpeg",
                size=photo.file_size,
                quoted=quoted,
            )
        )
    if not quoted:  # a quoted voice note is someone else's words, not this message's text
        found.extend(_speech_of(message))
    document = message.document
    if document is not None:
        found.append(
            Attachment(
                ref=document.file_id,
                name=document.file_name or "file",
                mime_type=document.mime_type or "",
                size=document.file_size,
                quoted=quoted,
            )
        )
    return found


def _speech_of(message: Message) -> list[Attachment]:
    """A voice note, audio file or video note, marked to be transcribed."""
    found = []
    if message.voice is not None:  # Opus in Ogg: `.oga` is the name transcription APIs accept
        voice = message.voice
        found.append(_spoken(voice.file_id, "voice.oga", "audio/ogg", voice.file_size, voice))
    if message.audio is not None:
        audio = message.audio
        mime = audio.mime_type or "audio/mpeg"
        name = audio.file_name or "audio"
        found.append(_spoken(audio.file_id, name, mime, audio.file_size, audio))
    if message.video_note is not None:
        note = message.video_note
        found.append(_spoken(note.file_id, "video_note.mp4", "video/mp4", note.file_size, note))
    return found


def _spoken(ref: str, name: str, mime: str, size: int | None, media: object) -> Attachment:
    duration = getattr(media, "duration", None)
    if isinstance(duration, dt.timedelta):
        duration = duration.total_seconds()
    return Attachment(
        ref=ref,
        name=name,
        mime_type=mime,
        size=size,
        speech=True,
        duration=float(duration) if isinstance(duration, int | float) else None,
    )


def replied_to(
    message: Message, me: User | None, limit: int
) -> tuple[list[ContextMessage], list[Attachment]]:
    """The message this one replies to: its text (with author) and its files."""
    quoted = message.reply_to_message
    if quoted is None:
        return [], []
    author = quoted.from_user
    from_bot = author is not None and me is not None and author.id == me.id
    name = (
        author.full_name
        if author is not None
        else (quoted.sender_chat and quoted.sender_chat.title)
    )
    text = quoted.text or quoted.caption or ""
    name = str(name or "someone")
    if (wrote := forward_author(quoted)) is not None:  # their words, not the forwarder's
        name, from_bot = f"{wrote} (forwarded by {name})", False
    context = [ContextMessage(author=name, text=text, from_bot=from_bot)]
    return (context if text else []), attachments_of(quoted, limit, quoted=True)


async def download(bot: Bot, attachment: Attachment, limit: int) -> bytes:
    """The file's bytes through getFile; FileTooLarge or DownloadError when it can't be had."""
    try:
        file = await bot.get_file(attachment.ref)
        if file.file_size is not None and file.file_size > limit:
            raise FileTooLarge(file.file_size, limit)
        data = bytes(await file.download_as_bytearray(read_timeout=DOWNLOAD_TIMEOUT))
    except BadRequest as exc:
        if "too big" in str(exc).lower():
            raise FileTooLarge(attachment.size, limit) from exc
        raise DownloadError(f"getFile refused ({type(exc).__name__})") from exc
    except TelegramError as exc:
        raise DownloadError(f"Telegram download failed ({type(exc).__name__})") from exc
    if len(data) > limit:
        raise FileTooLarge(len(data), limit)
    return data


def _largest_within(sizes: tuple[PhotoSize, ...], limit: int) -> PhotoSize:
    fitting = [s for s in sizes if s.file_size is None or s.file_size <= limit]
    candidates = fitting or list(sizes[:1])
    return max(candidates, key=lambda s: s.width * s.height)


def forward_author(message: Message) -> str | None:
    """Who wrote a forwarded message (`forward_origin`), or None if it is not a forward."""
    origin = message.forward_origin
    if origin is None:
        return None
    if isinstance(origin, MessageOriginUser):
        name = origin.sender_user.full_name
    elif isinstance(origin, MessageOriginHiddenUser):
        name = origin.sender_user_name
    elif isinstance(origin, MessageOriginChat):
        name = origin.sender_chat.effective_name or ""
    elif isinstance(origin, MessageOriginChannel):
        name = origin.chat.effective_name or ""
    else:
        name = ""
    signature = getattr(origin, "author_signature", None)
    name = f"{name} ({signature})" if name and signature else name or signature or ""
    return name.strip() or "someone"
