"""Voice notes, audio files and video notes become text through a transcription API.

The API is OpenAI's (`POST <url>/v1/audio/transcriptions`, multipart `file` + `model`,
answering `{"text": …}`), which whisper.cpp's server, faster-whisper servers and hosted
providers all speak. Runs in the worker once a message is admitted: the file comes through
the adapter like any attachment, within the size and duration limits, and the transcript
becomes the message's text. Whatever goes wrong is one sentence for the chat, and the next
message is unaffected. Neither audio nor transcripts reach the logs.

`Voice` is a feature of the executor (seam.py): it carries out `Transcribe`, answered with
`Transcribed`; without a transcription API it is still wired, and says so (or answers the
caption alone).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

import aiohttp

from adapters.base import (
    Attachment,
    ConversationSource,
    DownloadError,
    FileTooLarge,
    InboundMessage,
)
from bot.conversation import effects as fx
from bot.conversation.audio_length import measured_seconds
from bot.conversation.seam import Acting, Handler
from bot.conversation.texts import (
    NOTHING_HEARD,
    VOICE_CAPTION_ONLY,
    VOICE_FAILED,
    VOICE_NOT_SET_UP,
    VOICE_TOO_LARGE,
    VOICE_TOO_LONG,
    VOICE_TOO_MUCH_TEXT,
)

log = logging.getLogger(__name__)


LONGEST = 40_000  # characters of a transcript where no platform limit is given
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# What transcription APIs accept; a name without one of these gets one from its MIME type.
ACCEPTED = {".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"}
EXTENSIONS = {
    "audio/ogg": ".oga",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/m4a": ".m4a",
    "audio/aac": ".m4a",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/webm": ".webm",
    "audio/flac": ".flac",
    "audio/x-flac": ".flac",
    "video/mp4": ".mp4",
    "video/webm": ".webm",
    "video/quicktime": ".mp4",
}


class TranscriptionFailed(Exception):
    """The API did not give a transcript (an error status, a timeout, an unreadable answer)."""


@dataclass(frozen=True, kw_only=True)
class Transcriber:
    url: str
    model: str = "whisper-1"
    api_key: str | None = None
    timeout: float = 60.0

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        # A base that already names the API version (`…/v1`, as OpenAI's docs write it).
        return f"{base.removesuffix('/v1')}/v1/audio/transcriptions"

    async def transcribe(self, data: bytes, name: str, mime_type: str) -> str:
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=mime_type or None)
        form.add_field("model", self.model)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(self.endpoint, data=form, headers=headers) as response,
            ):
                if response.status != 200:
                    raise TranscriptionFailed(f"HTTP {response.status}")
                answer = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise TranscriptionFailed(type(exc).__name__) from exc
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise TranscriptionFailed("no text in the answer")
        return text


@dataclass(frozen=True, kw_only=True)
class Heard:
    """What came of a message's speech: the message with its transcript as text, or the one
    sentence that says why there is none."""

    event: InboundMessage
    transcript: str = ""
    refusal: str | None = None
    note: str | None = None  # said before the answer: the caption is answered, not the audio


@dataclass(frozen=True, kw_only=True)
class Voice:
    transcriber: Transcriber | None
    max_bytes: int = 20 * 1024 * 1024
    max_seconds: float = 600.0
    # platform → the longest message text (else `longest`): a transcript is held to it
    # like typed text
    max_chars: dict[str, int] = field(default_factory=dict)
    longest: int = LONGEST

    def handlers(self) -> Mapping[type, Handler]:
        return {fx.Transcribe: self._transcribe}

    async def _transcribe(self, acting: Acting, effect: fx.Transcribe) -> fx.Transcribed:
        event = acting.event
        assert isinstance(event, InboundMessage)  # only a message is admitted, then heard
        heard = await self.hear(event, acting.reply.adapter)
        return fx.Transcribed(
            received=fx.Received(entry_id=acting.received.entry_id, event=heard.event),
            transcript=heard.transcript,
            refusal=heard.refusal,
            note=heard.note,
        )

    async def hear(self, event: InboundMessage, source: object) -> Heard:
        """The message with its spoken attachments transcribed into its text."""
        spoken = [a for a in event.attachments if a.speech]
        rest = tuple(a for a in event.attachments if not a.speech)
        if self.transcriber is None:
            if event.text.strip():  # a caption: answered, with one line saying what was not
                return Heard(event=replace(event, attachments=rest), note=VOICE_CAPTION_ONLY)
            return Heard(event=event, refusal=VOICE_NOT_SET_UP)
        parts: list[str] = []
        for attachment in spoken:
            refusal = self._over_limits(attachment.size, attachment.duration)
            if refusal is not None:
                return Heard(event=event, refusal=refusal)
            if not isinstance(source, ConversationSource):
                return Heard(event=event, refusal=VOICE_FAILED)
            try:
                data = await source.download(attachment, self.max_bytes)
                # the declared duration is the sender's word: the bytes say how long it is
                seconds = await asyncio.to_thread(measured_seconds, data, self.max_seconds)
                refusal = self._over_limits(None, seconds)
                if refusal is not None:
                    return Heard(event=event, refusal=refusal)
                text = await self.transcriber.transcribe(
                    data, upload_name(attachment), attachment.mime_type
                )
            except FileTooLarge as exc:
                return Heard(event=event, refusal=self._over_limits(exc.size or -1, None))
            except (DownloadError, TranscriptionFailed) as exc:
                log.warning("a voice message could not be transcribed (%s)", exc)
                return Heard(event=event, refusal=VOICE_FAILED)
            if text.strip():
                parts.append(text.strip())
        if not parts:
            return Heard(event=event, refusal=NOTHING_HEARD)
        transcript = "\n\n".join(parts)
        text = f"{event.text}\n\n{transcript}" if event.text.strip() else transcript
        limit = self.max_chars.get(event.conversation.platform, self.longest)
        if len(text) > limit:
            return Heard(
                event=event, refusal=VOICE_TOO_MUCH_TEXT.format(length=len(text), limit=limit)
            )
        heard = replace(event, text=text, attachments=rest, length=len(text))
        return Heard(event=heard, transcript=transcript)

    def _over_limits(self, size: int | None, duration: float | None) -> str | None:
        if size is not None and (size < 0 or size > self.max_bytes):
            shown = f"{size / 1024 / 1024:.1f} MB" if size >= 0 else "over the limit"
            return VOICE_TOO_LARGE.format(size=shown, limit=f"{self.max_bytes / 1024 / 1024:g}")
        if duration is not None and duration > self.max_seconds:
            shown = f"{duration:.0f}" if duration != int(duration) else f"{duration:g}"
            return VOICE_TOO_LONG.format(seconds=shown, limit=f"{self.max_seconds:g}")
        return None


def spoken(event: InboundMessage) -> bool:
    """Whether the message carries speech still to be transcribed."""
    return any(a.speech for a in event.attachments)


def upload_name(attachment: Attachment) -> str:
    """The file name sent to the API, with an extension it accepts."""
    # Only the extension matters to the API: the rest is kept plain, so no multipart quoting
    # (or a hostile name) changes what it reads.
    name = UNSAFE.sub("_", PurePosixPath(attachment.name or "audio").name).strip("._") or "audio"
    if PurePosixPath(name).suffix.lower() in ACCEPTED:
        return name
    extension = EXTENSIONS.get(attachment.mime_type.split(";")[0].strip().lower(), ".ogg")
    return f"{PurePosixPath(name).stem or 'audio'}{extension}"
