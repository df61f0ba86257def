"""A stdio MCP server's stderr, relayed line by line into Parley's log.

Servers print start-up banners, warnings and sometimes the keys they were given there.
Handing them our own stderr would put that text straight on the terminal (or in `parley mcp
list`'s table), past the log handler that redacts secrets. So each server writes into a
pipe, and a thread turns every line into a log record: the handler redacts it and sends it
wherever the command's logs go (stderr for `parley run`, a file for doctor and mcp list).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
from contextlib import AsyncExitStack
from typing import TextIO

import anyio

log = logging.getLogger(__name__)

MAX_LINE = 1000  # characters of one stderr line kept in the log
JOIN_SECONDS = 1.0  # waiting for the relay after the server is gone


def relayed_stderr(stack: AsyncExitStack, server: str) -> TextIO:
    """A file for the server's stderr whose lines reach the log; closed with `stack`."""
    read_fd, write_fd = os.pipe()
    writer = io.TextIOWrapper(io.FileIO(write_fd, "w"), encoding="utf-8")
    relay = threading.Thread(
        target=_relay, args=(read_fd, server), name=f"mcp-stderr-{server}", daemon=True
    )
    relay.start()

    async def close() -> None:
        # The child holds its own copy: the relay sees the end once the server is gone too.
        writer.close()
        await anyio.to_thread.run_sync(relay.join, JOIN_SECONDS)

    stack.push_async_callback(close)
    return writer


def _relay(read_fd: int, server: str) -> None:
    with contextlib.closing(os.fdopen(read_fd, "rb")) as reader:
        for raw in reader:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                log.info("MCP server %s (stderr): %s", server, line[:MAX_LINE])
