"""Starting the test MCP server (tests/fakes/mcp_server.py) the ways Parley connects to it.

config = stdio_server(ledger)                # a ServerConfig Parley spawns itself
with http_server("s3cret") as url: ...       # a Streamable HTTP server on 127.0.0.1
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.mcp import ServerConfig
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.fakes.mcp_server"


def stdio_server(ledger: Path | None = None, **options: Any) -> ServerConfig:
    env = {"MCP_LEDGER": str(ledger)} if ledger is not None else {}
    env.update(options.pop("env", {}))
    return ServerConfig(
        command=sys.executable, args=["-m", MODULE], cwd=str(ROOT), env=env, **options
    )


@contextlib.contextmanager
def http_server(
    token: str,
    ledger: Path | None = None,
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """A Streamable HTTP MCP server that wants `Authorization: Bearer <token>` (`env`: its
    options, as `MCP_TASKS`); yields its URL."""
    port = port or free_port()
    env = {**os.environ, **(env or {}), **({"MCP_LEDGER": str(ledger)} if ledger else {})}
    process = subprocess.Popen(
        [sys.executable, "-m", MODULE, "--http", str(port), "--token", token],
        cwd=ROOT,
        env=env,
    )
    try:
        _wait_for(process, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _end(process)


@contextlib.contextmanager
def oauth_http_server(issuer: str, ledger: Path | None = None) -> Iterator[str]:
    """A Streamable HTTP MCP server that wants each caller's own token from `issuer`
    (tests/fakes/mcp_oauth_server.py); yields its URL."""
    port = free_port()
    env = {**os.environ, **({"MCP_LEDGER": str(ledger)} if ledger else {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.mcp_oauth_server", str(port), issuer],
        cwd=ROOT,
        env=env,
    )
    try:
        _wait_for(process, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _end(process)


def _wait_for(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, "the MCP HTTP server exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.05)


def _end(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
