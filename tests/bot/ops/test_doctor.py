from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from bot.cli import main
from bot.config import Settings
from bot.ops.doctor import run_doctor
from bot.ops.embedded_redis import EmbeddedRedis, free_port

pytestmark = pytest.mark.process


@pytest.fixture
def plain_redis_url(tmp_path) -> Iterator[str]:
    """The same server binary with no modules loaded: a Redis without search."""
    embedded = EmbeddedRedis(tmp_path)
    assert embedded.server is not None
    port = free_port()
    process = subprocess.Popen(
        [str(embedded.server), "--port", str(port), "--save", "", "--appendonly", "no"],
        env=embedded.environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    try:
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        process.terminate()
        process.wait(10)


def settings_with(**sections: dict[str, object]) -> Settings:
    closed = f"http://127.0.0.1:{free_port()}"
    sections.setdefault("ollama", {"OLLAMA_HOST": closed})
    return Settings.load(env_file=None, **sections)


async def test_redis_without_search_is_a_clear_failure(
    plain_redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_doctor(settings_with(redis={"REDIS_URL": plain_redis_url}))
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if " redis " in f" {line} ")
    assert line.startswith("fail") and "search module is missing" in line
    assert "Redis 8 or Redis Stack" in out
    assert code == 1


async def test_redis_with_search_passes(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    await run_doctor(settings_with(redis={"REDIS_URL": redis_url}))
    out = capsys.readouterr().out
    assert any(line.startswith("ok") and "search module" in line for line in out.splitlines())


async def test_unreachable_redis_url_fails_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    code = await run_doctor(
        settings_with(redis={"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    )
    out = capsys.readouterr().out
    assert "cannot reach REDIS_URL" in out and code == 1


async def test_no_credentials_reports_not_configured(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_doctor(settings_with(redis={"REDIS_URL": redis_url}))
    out = capsys.readouterr().out
    for name in ("anthropic", "ollama", "slack", "telegram"):
        line = next(line for line in out.splitlines() if f" {name} " in line)
        assert line.startswith("not configured"), line
    assert "not ready: no model provider" in out
    assert "settings are read from .env (copy .env.example, which lists them all)" in out
    assert code == 1


async def test_embedded_redis_is_checked_without_starting_it(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_doctor(settings_with(redis={"PARLEY_DATA_DIR": str(tmp_path)}))
    out = capsys.readouterr().out
    assert any(
        line.startswith("ok") and "embedded Redis Stack" in line for line in out.splitlines()
    )


def test_parley_doctor_also_checks_the_mcp_servers(
    redis_url: str,
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The MCP check lives with the MCP wiring; the command must still run it.
    bad = tmp_path / "mcp.json"
    bad.write_text('{"mcpServers": {"x": {"url": "ftp://nope"}}}')
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("PARLEY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PARLEY_MCP_CONFIG", str(bad))
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("PARLEY_HTTP_PORT", "0")
    monkeypatch.setenv("PARLEY_METRICS_PORT", "0")
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert main(["--env-file", "/dev/null", "doctor"]) == 1
    finally:  # doctor logs to a file of its own: close it, put the test's logging back
        for handler in set(root.handlers) - set(saved[0]):
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if " mcp " in f" {line} ")
    assert line.startswith("fail") and "mcp.json" in line


async def test_the_memory_index_shows_which_embedder_made_it(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.ops.embedding_check import check_memory_index

    client = redis.Redis.from_url(redis_url)
    try:
        client.hset(
            "parley:memory:meta",
            mapping={"model": "all-MiniLM-L6-v2", "dims": "384", "algorithm": "hnsw"},
        )
        client.hset("parley:memory:counts", mapping={"user:telegram:1": 3, "chat:slack:C1": 2})
        same = await check_memory_index(settings_with(redis={"REDIS_URL": redis_url}))
        assert same.status == "ok"
        assert same.detail == "index built by all-MiniLM-L6-v2 (384-d, hnsw), 5 memories"
        other = await check_memory_index(
            settings_with(
                redis={"REDIS_URL": redis_url}, memory={"PARLEY_EMBEDDER": "multilingual"}
            )
        )
        assert other.status == "fail"
        assert "PARLEY_EMBEDDER=multilingual uses multilingual-e5-small-q4" in other.detail
        assert "memory reindex" in other.hint
        client.hset("parley:memory:moving", mapping={"model": "x", "embedder": "multilingual"})
        cut = await check_memory_index(settings_with(redis={"REDIS_URL": redis_url}))
        assert cut.status == "warn" and "PARLEY_EMBEDDER=multilingual" in cut.hint
    finally:
        client.close()
    await run_doctor(settings_with(redis={"REDIS_URL": redis_url}))
    out = capsys.readouterr().out
    assert any(" memory " in f" {line} " and "index built by" in line for line in out.splitlines())
