"""A private Redis Stack server for one test, which the test may stop and start again.

It keeps its data (AOF, flushed on a clean stop) and its port across a restart, so clients
that knew it reconnect to the same data once it is back:

    async with private_redis(tmp_path) as server:
        client = server.client()  # the service's own client, with its retry
        await server.down()       # clients now get connection errors
        await server.up()         # same port, same data

A bare client has no retry: the first command on each connection a restart left stale fails
once more after Redis is back, so a loop would log a second degradation no service sees.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import redis.asyncio as aioredis

from bot.config import Settings
from bot.ops.embedded_redis import EmbeddedRedis
from bot.wiring.connection import redis_client


class PrivateRedis:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = 0  # the first `up` picks a free one (again if it is taken meanwhile)
        self._server: EmbeddedRedis | None = None
        # Clear while an `up` waits for the server to answer. Clients may be served already,
        # so a `down` meanwhile waits for it and then stops that server.
        self._started = asyncio.Event()
        self._started.set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> aioredis.Redis:
        """A client built as the service builds its own."""
        return redis_client(self.url, Settings.load(env_file=None))

    async def up(self) -> None:
        assert self._server is None and self._started.is_set()
        server = EmbeddedRedis(self.folder, persistent=True, port=self.port)
        self._started.clear()
        try:
            await asyncio.to_thread(server.start)
            self._server, self.port = server, server.port
        finally:
            self._started.set()

    async def down(self) -> None:
        await self._started.wait()
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.stop)


@contextlib.asynccontextmanager
async def private_redis(folder: Path) -> AsyncIterator[PrivateRedis]:
    server = PrivateRedis(folder)
    await server.up()
    try:
        yield server
    finally:
        await server.down()
