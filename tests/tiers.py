"""The fast tier: tests that need no Redis, no network and no child process.

`pytest --tier fast` runs only those, `--tier slow` only the others; without the option
every test runs. A test belongs to the slow tier when it uses a fixture that starts a server
(`SERVER_FIXTURES`, directly or through another fixture), lives in a folder of whole
processes (`SLOW_FOLDERS`), or is marked `network`, `process` or `heavy` (seconds of CPU). Everything else is fast,
and under `--tier fast` a guard fails a test that opens an internet socket or starts a
process anyway, saying which mark it needs. `make test` runs the fast tier first, so a
mislabelled test fails CI.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

SERVER_FIXTURES = frozenset(
    {
        "redis_server",
        "external_redis",
        "redis_url",
        "telegram",  # tests/conftest.py: the fake Bot API
        "hosted",  # tests/agent/llm/conftest.py: the fake Anthropic API
        "local",  # tests/agent/llm/conftest.py: the fake Ollama API
    }
)
SLOW_MARKS = frozenset({"network", "process", "heavy", "e2e"})
SLOW_FOLDERS = ("tests/e2e/", "tests/deploy/")
INTERNET = (socket.AF_INET, socket.AF_INET6)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=("fast", "slow"),
        default=None,
        help="fast: only tests with no Redis, network or child process; slow: the others",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "network: opens sockets (a fake server, a port probe)")
    config.addinivalue_line("markers", "process: starts a child process")
    config.addinivalue_line("markers", "heavy: seconds of CPU (building or scoring the model)")
    config.addinivalue_line("markers", "fast: needs no Redis, network or child process")


def is_fast(item: pytest.Item) -> bool:
    path = item.nodeid.replace("\\", "/")
    if path.startswith(SLOW_FOLDERS):
        return False
    if SLOW_MARKS & {mark.name for mark in item.iter_markers()}:
        return False
    return not SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("--tier")
    keep, drop = [], []
    for item in items:
        fast = is_fast(item)
        if fast:
            item.add_marker(pytest.mark.fast)
        (keep if tier is None or (tier == "fast") == fast else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _refuse(what: str, mark: str) -> Callable[..., Any]:
    def refused(*args: object, **kwargs: object) -> Any:
        pytest.fail(
            f"a fast-tier test {what}: mark it `pytest.mark.{mark}` (or use a server fixture)",
            pytrace=False,
        )

    return refused


@pytest.fixture(autouse=True)
def _fast_tier_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.config.getoption("--tier") != "fast":
        yield
        return
    mp = pytest.MonkeyPatch()
    real_connect, real_bind = socket.socket.connect, socket.socket.bind

    def guarded(real: Callable[..., Any], what: str) -> Callable[..., Any]:
        def call(sock: socket.socket, address: Any) -> Any:
            if sock.family in INTERNET:
                _refuse(what, "network")()
            return real(sock, address)

        return call

    mp.setattr(socket.socket, "connect", guarded(real_connect, "opened a connection"))
    mp.setattr(
        socket.socket, "connect_ex", guarded(socket.socket.connect_ex, "opened a connection")
    )
    mp.setattr(socket.socket, "bind", guarded(real_bind, "listened on a port"))
    mp.setattr(subprocess.Popen, "__init__", _refuse("started a process", "process"))
    mp.setattr(
        multiprocessing.process.BaseProcess, "start", _refuse("started a process", "process")
    )
    mp.setattr(os, "fork", _refuse("forked", "process"))
    try:
        yield
    finally:
        mp.undo()
