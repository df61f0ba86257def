"""Every configured secret, including ones inside MCP URLs and headers, and nothing a run or
the operator commands write holds any of them: log lines (at DEBUG), stdout and stderr of
`parley run`, `parley doctor` and `parley mcp list`, /metrics and /readyz."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.test_processes import Cluster, free_port, texts, until, world  # noqa: F401
from tests.fakes.mcp_process import ROOT, http_server
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.e2e

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret-anthropic-0001",
    "SLACK_SIGNING_SECRET": "secret-signing-0002",
    "PARLEY_TELEGRAM_WEBHOOK_SECRET": "secret-webhook-0003",
    "PARLEY_TRANSCRIBE_API_KEY": "secret-transcribe-0004",
    "MCP_URL_KEY": "secret-in-the-mcp-url-0005",
    "MCP_HEADER_TOKEN": "secret-in-the-mcp-header-0006",
    "STDIO_TOKEN": "secret-for-the-stdio-server-0007",
}
SLACK_TOKEN = "xoxb-secret-slack-0008"


def logs_in(*folders: Path) -> list[str]:
    return [path.read_text() for folder in folders for path in folder.glob("*.log")]


async def fetch(port: int, path: str) -> str:
    async with (
        aiohttp.ClientSession() as client,
        client.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return await response.text()


async def command(env: dict[str, str], *args: str) -> str:
    """Run `parley <args>` to the end; everything it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "--env-file",
        "/dev/null",
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return out.decode() + err.decode()


async def test_no_secret_reaches_a_log_line_cli_output_metrics_or_readyz(
    world: tuple[Cluster, FakeTelegram, Path],  # noqa: F811 - the fixture, imported
    tmp_path: Path,
) -> None:
    cluster, telegram, _ = world
    slack = await FakeSlack(bot_token=SLACK_TOKEN).start()
    data = tmp_path / "data"
    try:
        with http_server(SECRETS["MCP_HEADER_TOKEN"]) as url:
            config = tmp_path / "mcp.json"
            servers: dict[str, Any] = {
                "remote": {
                    "url": url + "?api_key=${MCP_URL_KEY}",
                    "headers": {"Authorization": "Bearer ${MCP_HEADER_TOKEN}"},
                },
                "local": {
                    "command": sys.executable,
                    "args": ["-m", "tests.fakes.mcp_server"],
                    "cwd": str(ROOT),
                    "env": {"API_TOKEN": "${STDIO_TOKEN}"},
                },
            }
            config.write_text(json.dumps({"mcpServers": servers}))
            port = free_port()
            extra = {
                **SECRETS,
                "SLACK_BOT_TOKEN": SLACK_TOKEN,
                "SLACK_API_URL": slack.api_url,
                "PARLEY_MCP_CONFIG": str(config),
                "PARLEY_LOG_LEVEL": "DEBUG",
                "PARLEY_DATA_DIR": str(data),
            }
            env = {**cluster.env, **extra, "PARLEY_METRICS_PORT": "0"}
            written = [await command(env, "mcp", "list"), await command(env, "doctor")]
            process = await cluster.start("run", **extra, PARLEY_METRICS_PORT=str(port))
            await cluster.ready(process)
            deadline = time.monotonic() + 30
            while "2/2 servers ready" not in await fetch(port, "/readyz"):
                assert time.monotonic() < deadline, await fetch(port, "/readyz")
                await asyncio.sleep(0.2)
            telegram.push(telegram.message(chat_id=42, user_id=42, text="hello there"))
            await until(lambda: bool(telegram.chat(42)))
            assert texts(telegram, 42) == ["echo: hello there"]
            written += [await fetch(port, "/readyz"), await fetch(port, "/metrics")]
            assert await cluster.stop(process) == 0
    finally:
        await slack.stop()
    written += logs_in(tmp_path, data)
    everything = "\n".join(written)
    assert "remote" in everything and "MCP server" in everything  # the logs were read
    for name, secret in {**SECRETS, "SLACK_BOT_TOKEN": SLACK_TOKEN}.items():
        assert secret not in everything, f"{name} was written out"
    assert telegram.token not in everything


async def test_a_stdio_mcp_server_cannot_read_parleys_environment_or_memory(
    world: tuple[Cluster, FakeTelegram, Path],  # noqa: F811 - the fixture, imported
    tmp_path: Path,
) -> None:
    """The model obeys a message that asks it to run the server's /proc reader; what the
    server could read comes back as the tool result."""
    cluster, telegram, _ = world
    config = tmp_path / "mcp.json"
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server"],
        "cwd": str(ROOT),
        "approval": "never",
    }
    config.write_text(json.dumps({"mcpServers": {"local": server}}))
    secret = SECRETS["PARLEY_TRANSCRIBE_API_KEY"]
    port = free_port()
    process = await cluster.start(
        "run",
        PARLEY_MCP_CONFIG=str(config),
        PARLEY_TRANSCRIBE_API_KEY=secret,
        PARLEY_METRICS_PORT=str(port),
    )
    await cluster.ready(process)
    deadline = time.monotonic() + 30
    while "1/1 servers ready" not in await fetch(port, "/readyz"):
        assert time.monotonic() < deadline, await fetch(port, "/readyz")
        await asyncio.sleep(0.2)
    telegram.push(telegram.message(chat_id=42, user_id=42, text=f"steal environ {secret}"))
    await until(lambda: len(telegram.chat(42)) == 1, within=60)
    telegram.push(telegram.message(chat_id=42, user_id=42, text=f"steal mem {secret}"))
    await until(lambda: len(telegram.chat(42)) == 2, within=120)
    environ, mem = texts(telegram, 42)
    # as another user, or as the same user without root, environ is closed too; as root
    # (CAP_DAC_OVERRIDE) Linux still lets it be read, with the secrets blanked out
    assert environ.startswith("proc: ") and secret not in environ, environ
    assert mem.startswith("proc: denied"), mem
    assert await cluster.stop(process) == 0
