"""Where Redis comes from on each platform, and running the suite on another Redis server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from bot.ops.embedded_redis import EmbeddedRedis, embedded_supported, setup_hint

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("system", "machine"), [("Darwin", "arm64"), ("Darwin", "x86_64"), ("Linux", "aarch64")]
)
def test_elsewhere_than_linux_x86_64_the_hint_says_how_to_get_redis_8(
    system: str, machine: str
) -> None:
    assert not embedded_supported(system, machine)
    hint = setup_hint(system, machine)
    assert "\n" not in hint
    assert f"{system} {machine}" in hint
    assert "redis:8" in hint and "REDIS_URL=redis://127.0.0.1:6379/0" in hint


def test_on_linux_x86_64_the_bundled_server_is_used() -> None:
    assert embedded_supported("Linux", "x86_64") and embedded_supported("Linux", "AMD64")
    assert "make setup" in setup_hint("Linux", "x86_64")


def setup(tmp_path: Path, system: str, machine: str, **env: str) -> str:
    """Runs scripts/setup.sh (already set up: it only compares stamps) with a given uname."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "uname").write_text(
        f'#!/bin/sh\ncase "$1" in -m) echo {machine};; *) echo {system};; esac\n'
    )
    (fake / "uname").chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    result = subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=ROOT,
        env={**base, "PATH": f"{fake}{os.pathsep}{base['PATH']}", **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return result.stdout


@pytest.mark.skipif((ROOT / ".env").exists(), reason="a developer's .env may set REDIS_URL")
def test_make_setup_says_in_one_line_how_to_get_redis_8_elsewhere(tmp_path: Path) -> None:
    lines = [line for line in setup(tmp_path, "Darwin", "arm64").splitlines() if "Redis" in line]
    assert lines == [f"setup: {setup_hint('Darwin', 'arm64')}"]
    configured = setup(tmp_path, "Darwin", "arm64", REDIS_URL="redis://127.0.0.1:6379/0")
    assert "redis:8" not in configured
    assert "redis:8" not in setup(tmp_path, "Linux", "x86_64")


def test_a_redis_8_build_has_its_modules_loaded(tmp_path: Path) -> None:
    # Redis 8 images and packages keep redis-server in bin/ and modules in lib/redis/modules/.
    server = tmp_path / "usr" / "bin" / "redis-server"
    modules = tmp_path / "usr" / "lib" / "redis" / "modules"
    server.parent.mkdir(parents=True)
    modules.mkdir(parents=True)
    server.touch()
    for name in ("redisearch.so", "rejson.so"):
        (modules / name).touch()
    command = EmbeddedRedis(tmp_path / "data", server=server).command()
    loaded = [command[i + 1] for i, arg in enumerate(command) if arg == "--loadmodule"]
    assert loaded == [str(modules / "redisearch.so"), str(modules / "rejson.so")]


def test_the_suite_runs_against_the_server_in_parley_test_redis_url(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "other", persistent=False) as other:
        client = redis.Redis.from_url(other.url)
        try:
            client.config_resetstat()
            env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "tests/memory/test_store.py::test_private_memories_never_reach_someone_else",
                ],
                cwd=ROOT,
                env={**env, "PARLEY_TEST_REDIS_URL": other.url},
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert result.returncode == 0, result.stdout + result.stderr
            assert "1 passed" in result.stdout
            stats = client.info("commandstats")
            # The memory index was created and searched on this server, not on another one.
            assert stats.get("cmdstat_FT.CREATE", {}).get("calls", 0) >= 1, sorted(stats)
            assert stats.get("cmdstat_flushall", {}).get("calls", 0) >= 1
        finally:
            client.close()
