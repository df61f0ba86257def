"""A fake OpenAI-compatible transcription API (whisper.cpp's server, faster-whisper, hosted).

    async with FakeTranscriber(text="call Ana at five") as fake:
        settings: PARLEY_TRANSCRIBE_URL=fake.url
        fake.uploads[0].data / .filename / .model / .authorization   # what was sent
        fake.status = 500      # answer with an error
        fake.hang = True       # never answer (until stopped)

`POST /v1/audio/transcriptions` takes multipart form data (`file`, `model`) and answers
`{"text": …}`, as the real API does with the default `response_format=json`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP

from aiohttp import web

from tests.fakes.server import FakeServer, Recorded, json_response

PATH = "/v1/audio/transcriptions"


@dataclass(frozen=True, kw_only=True)
class Upload:
    data: bytes
    filename: str
    content_type: str
    model: str
    authorization: str | None


class FakeTranscriber(FakeServer):
    def __init__(self, text: str = "") -> None:
        super().__init__(name="transcribe")
        self.text = text
        self.status = 200
        self.hang = False
        self.uploads: list[Upload] = []
        self._released = asyncio.Event()
        self.add("POST", PATH, self._transcribe)

    async def stop(self) -> None:
        self._released.set()  # a hanging answer ends with the server
        await super().stop()

    async def _transcribe(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        fields = parse_form(request.headers.get("Content-Type", ""), recorded.raw)
        file = fields.get("file")
        if file is None or "model" not in fields:
            return json_response({"error": {"message": "file and model are required"}}, 400)
        self.uploads.append(
            Upload(
                data=file[1],
                filename=file[0],
                content_type=file[2],
                model=fields["model"][1].decode(),
                authorization=request.headers.get("Authorization"),
            )
        )
        if self.hang:
            await self._released.wait()
        if self.status != 200:
            return json_response({"error": {"message": "the model is unavailable"}}, self.status)
        return json_response({"text": self.text})


def parse_form(content_type: str, raw: bytes) -> dict[str, tuple[str, bytes, str]]:
    """Multipart form fields: name -> (file name, bytes, content type)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + raw)
    fields = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        fields[str(name)] = (part.get_filename() or "", payload, part.get_content_type())
    return fields
