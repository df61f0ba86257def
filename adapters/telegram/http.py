"""python-telegram-bot's HTTP layer on aiohttp, built on PTB's public request API only.

PTB lets a bot bring its own `BaseRequest`. Sending replies is on every objective's path, and
under load PTB's default httpx transport costs several times the CPU of an aiohttp request
(most of it in connection-pool bookkeeping; `bench/bench_telegram_transport.py` measures the
two side by side). Long polling keeps PTB's own transport.
"""

from __future__ import annotations

import aiohttp
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData


class AiohttpRequest(BaseRequest):
    def __init__(
        self,
        *,
        connection_pool_size: int = 32,
        connect_timeout: float = 5.0,
        read_timeout: float = 5.0,
        write_timeout: float = 5.0,
        media_write_timeout: float = 20.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._media_write_timeout = media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        # After shutdown a send fails rather than open a session nobody would close (PTB's own
        # transport refuses too); initialize() opens it again.
        self._shut = False

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        self._shut = False
        self._open()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT},
            )
        return self._session

    async def shutdown(self) -> None:
        self._shut = True
        session, self._session = self._session, None  # a send meanwhile cannot replace it
        if session is not None:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: object = BaseRequest.DEFAULT_NONE,
        write_timeout: object = BaseRequest.DEFAULT_NONE,
        connect_timeout: object = BaseRequest.DEFAULT_NONE,
        pool_timeout: object = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._shut:
            raise NetworkError("the Telegram transport is shut down")
        session = self._open()  # a worker sends without ever initializing the bot
        files = request_data is not None and request_data.contains_files
        read = _seconds(read_timeout, self._read_timeout)
        write = _seconds(write_timeout, self._media_write_timeout if files else self._write_timeout)
        # aiohttp has no separate write timeout: the whole request gets read + write.
        timeout = aiohttp.ClientTimeout(
            total=None if read is None else read + (write or 0),
            connect=_seconds(pool_timeout, None),
            sock_connect=_seconds(connect_timeout, self._connect_timeout),
            sock_read=read,
        )
        try:
            data = _body(request_data, files)
            async with session.request(method, url, data=data, timeout=timeout) as response:
                return response.status, await response.read()
        except TimeoutError as exc:
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc


def _seconds(value: object, default: float | None) -> float | None:
    """A timeout PTB passed, or ours when it passed none (`BaseRequest.DEFAULT_NONE`)."""
    if value is BaseRequest.DEFAULT_NONE:
        return default
    assert value is None or isinstance(value, int | float), value
    return value


def _body(
    request_data: RequestData | None, files: bool
) -> aiohttp.FormData | dict[str, str] | None:
    """Form fields, or multipart when the request uploads files (as PTB's httpx layer does)."""
    if request_data is None:
        return None
    if not files:
        return request_data.json_parameters
    form = aiohttp.FormData()
    for name, value in request_data.json_parameters.items():
        form.add_field(name, value)
    for name, (filename, content, mimetype) in request_data.multipart_data.items():
        form.add_field(name, content, filename=filename, content_type=mimetype)
    return form
