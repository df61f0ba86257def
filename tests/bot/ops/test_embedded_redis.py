from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from bot.ops import embedded_redis
from bot.ops.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from tests.helpers import free_port

pytestmark = pytest.mark.process

PORT_LINE = re.compile(rb"embedded Redis Stack on 127\.0\.0\.1:(\d+)")


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_closed(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while port_open(port):
        assert time.monotonic() < deadline, f"something still listens on {port}"
        time.sleep(0.05)


def test_starts_with_search_and_json_and_persists_across_restarts(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as server:
        client = redis.Redis.from_url(server.url)
        modules = {m[b"name"].decode().lower() for m in client.module_list()}
        assert {"search", "rejson"} <= modules
        client.set("remembered", "yes")
        client.close()
        first_port = server.port
    wait_closed(first_port)
    assert (tmp_path / "redis" / "appendonlydir").is_dir()
    with EmbeddedRedis(tmp_path) as server:
        client = redis.Redis.from_url(server.url)
        assert client.get("remembered") == b"yes"
        client.close()


def test_a_second_server_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path), pytest.raises(EmbeddedRedisError, match="another Parley"):
        EmbeddedRedis(tmp_path).start()


def test_a_port_taken_before_redis_binds_it_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the free-port probe and Redis's bind another process (a parallel test worker,
    a second Parley) may take the port; the server then starts on another one."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = [busy]
        monkeypatch.setattr(
            embedded_redis, "free_port", lambda: picks.pop() if picks else free_port()
        )
        with EmbeddedRedis(tmp_path, persistent=False) as server:
            assert server.port != busy and not picks
            client = redis.Redis(port=server.port)
            assert client.ping()
            client.close()
        # A port asked for is not swapped for another: that is one clear error.
        with pytest.raises(EmbeddedRedisError, match=f"127.0.0.1:{busy}: another process"):
            EmbeddedRedis(tmp_path, persistent=False, port=busy).start()


def test_a_missing_binary_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedRedisError, match="REDIS_URL"):
        EmbeddedRedis(tmp_path, server=tmp_path / "nope" / "redis-server").start()


def test_a_server_that_cannot_load_its_libraries_is_explained(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "redis-server"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'redis-server: error while loading shared libraries: "
        "libssl.so.1.1: cannot open shared object file' >&2\nexit 127\n"
    )
    fake.chmod(0o755)
    with pytest.raises(EmbeddedRedisError) as caught:
        EmbeddedRedis(tmp_path, server=fake).start()
    assert "OpenSSL 1.1" in str(caught.value) and "make setup" in str(caught.value)


def start_parley(data_dir: Path, port: int) -> tuple[subprocess.Popen[bytes], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.update(PARLEY_DATA_DIR=str(data_dir), PARLEY_HTTP_PORT=str(port), PARLEY_METRICS_PORT="0")
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "--env-file", "/dev/null", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    output = b""
    deadline = time.monotonic() + 60
    try:
        while b"Parley is running" not in output:
            assert time.monotonic() < deadline and process.poll() is None, output.decode()
            output += process.stdout.readline()
        found = PORT_LINE.search(output)
        assert found, output.decode()
    except BaseException:
        stop(process)  # a Parley that never came up must not outlive the test with its Redis
        raise
    return process, int(found.group(1))


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(10)
    if process.stdout is not None:
        process.stdout.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_parley_run_starts_embedded_redis_keeps_data_and_stops_cleanly(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    process, redis_port = start_parley(tmp_path, free_port())
    try:
        client = redis.Redis(port=redis_port)
        client.set("written-by", "first run")
        client.close()
        process.send_signal(stop_signal)
        assert process.wait(30) == 0
    finally:
        stop(process)
    wait_closed(redis_port)

    process, redis_port = start_parley(tmp_path, free_port())
    try:
        client = redis.Redis(port=redis_port)
        assert client.get("written-by") == b"first run"
        client.close()
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        stop(process)
    wait_closed(redis_port)


def test_killing_parley_outright_takes_its_redis_down_too(tmp_path: Path) -> None:
    process, redis_port = start_parley(tmp_path, free_port())
    stop(process)
    wait_closed(redis_port)
