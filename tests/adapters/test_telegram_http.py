"""PTB's HTTP layer on aiohttp: form and multipart bodies, timeouts and network failures
surface as PTB's own errors (which the adapter and PTB already know how to handle)."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut

from adapters.telegram.http import AiohttpRequest

pytestmark = pytest.mark.network

TOKEN = "123456:TEST-token"


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def method(request: web.Request) -> web.Response:
        name = request.match_info["method"]
        if name == "slow":
            await asyncio.sleep(1)
        form = await request.post()
        fields = {
            k: (v.file.read().decode() if isinstance(v, web.FileField) else v)
            for k, v in form.items()
        }
        seen.append({"method": name, "content_type": request.content_type, **fields})
        if name == "sendDocument":
            message = {"message_id": 1, "date": 0, "chat": {"id": 7, "type": "private"}}
            return web.json_response({"ok": True, "result": message})
        return web.json_response({"ok": True, "result": True})

    app = web.Application()
    app.router.add_post(f"/bot{TOKEN}/{{method}}", method)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


async def test_form_and_multipart_bodies(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = server
    request = AiohttpRequest()
    bot = Bot(TOKEN, base_url=f"{url}/bot", request=request)
    try:
        # A method the adapter uses (form-encoded), and an upload (multipart).
        assert await bot.send_chat_action(chat_id=7, action="typing")
        document = InputFile(io.BytesIO(b"hello file"), filename="notes.txt")
        assert (await bot.send_document(chat_id=7, document=document)).message_id == 1
    finally:
        await request.shutdown()
    assert seen[0]["method"] == "sendChatAction"
    assert seen[0]["content_type"] == "application/x-www-form-urlencoded"
    assert (seen[0]["chat_id"], seen[0]["action"]) == ("7", "typing")
    upload = seen[1]
    assert upload["content_type"] == "multipart/form-data"
    assert upload["chat_id"] == "7"
    assert "hello file" in json.dumps(upload)


async def test_a_slow_answer_is_a_timeout(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = server
    request = AiohttpRequest(read_timeout=0.2)
    try:
        with pytest.raises(TimedOut):
            await request.post(f"{url}/bot{TOKEN}/slow")
    finally:
        await request.shutdown()


async def test_nobody_listening_is_a_network_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    request = AiohttpRequest()
    try:
        with pytest.raises(NetworkError):
            await request.post(f"http://127.0.0.1:{port}/bot{TOKEN}/getMe")
    finally:
        await request.shutdown()


def open_sessions() -> set[int]:
    """The aiohttp client sessions alive and not closed, by id."""
    gc.collect()
    return {
        id(o) for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession) and not o.closed
    }


async def test_after_shutdown_a_send_fails_and_opens_nothing(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    """A reply sent after the adapter stopped would open a session that nobody closes: it
    fails as a network error (so it is parked and sent again) until the transport starts."""
    url, seen = server
    before = open_sessions()
    request = AiohttpRequest()
    assert await request.post(f"{url}/bot{TOKEN}/getMe") is True  # no initialize needed
    await request.shutdown()
    with pytest.raises(NetworkError, match="shut down"):
        await request.post(f"{url}/bot{TOKEN}/sendMessage")
    assert open_sessions() == before
    await request.initialize()  # started again
    try:
        assert await request.post(f"{url}/bot{TOKEN}/sendMessage") is True
    finally:
        await request.shutdown()
    assert [s["method"] for s in seen] == ["getMe", "sendMessage"]
    assert open_sessions() == before


async def test_a_send_racing_the_shutdown_leaves_no_session_open(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    url, _ = server
    before = open_sessions()
    request = AiohttpRequest()
    assert await request.post(f"{url}/bot{TOKEN}/getMe") is True
    results = await asyncio.gather(
        request.shutdown(), request.post(f"{url}/bot{TOKEN}/sendMessage"), return_exceptions=True
    )
    assert isinstance(results[1], NetworkError)
    assert open_sessions() == before
