"""Secrets a command shows by accident: what an MCP stdio server prints on its stderr, and
the password inside a URL (REDIS_URL, OLLAMA_HOST, an MCP server's), whatever its length."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import Settings
from bot.ops.embedded_redis import free_port
from bot.ops.logs import RedactingFilter
from bot.ops.secrets import RedactingStream, configured_secrets
from tests.fakes.mcp_process import stdio_server

KEY = "sk-live-9fQ2mZ7xW4"  # handed to the MCP server by its config, so a configured secret
SHORT = "Zq9"  # too short for the secrets list: only its place in a URL gives it away


@pytest.fixture
def own_logging() -> Iterator[None]:
    """The command reconfigures logging (to a file of its own): put the test's back."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        yield
    finally:
        for handler in set(root.handlers) - set(saved[0]):
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.mark.process
@pytest.mark.usefixtures("own_logging")
def test_an_mcp_servers_stderr_goes_to_the_redacted_log_not_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    banner = f"tracker v2 starting, key={KEY}"
    server = stdio_server(env={"TRACKER_KEY": KEY, "MCP_STDERR_BANNER": banner})
    path = tmp_path / "mcp.json"
    raw = {"tracker": server.model_dump(exclude_defaults=True)}
    path.write_text(json.dumps({"mcpServers": raw}))
    monkeypatch.setenv("PARLEY_MCP_CONFIG", str(path))
    monkeypatch.setenv("PARLEY_MCP_START_TIMEOUT", "30")
    monkeypatch.setenv("PARLEY_DATA_DIR", str(tmp_path / "data"))
    assert main(["--env-file", "/dev/null", "mcp", "list"]) == 0
    out, err = capfd.readouterr()  # the file descriptors: where a child writes unasked
    assert "tracker v2 starting" not in out + err and KEY not in out + err
    assert out.startswith("tracker  [stdio]")
    logged = (tmp_path / "data" / "mcp.log").read_text()
    assert "MCP server tracker (stderr): tracker v2 starting, key=[redacted]" in logged
    assert KEY not in logged


def test_a_password_in_a_url_is_redacted_in_log_lines_and_printed_text() -> None:
    settings = Settings.load(env_file=None, redis={"REDIS_URL": f"redis://:{SHORT}@db:6379/0"})
    secrets = configured_secrets(settings)
    lines = [
        f"cannot reach redis://:{SHORT}@db:6379/0 (ConnectionError)",
        f"no Ollama at http://parley:{SHORT}@10.0.0.5:11434 (ConnectError)",
        f"MCP at https://bot:p%40{SHORT}@mcp.example/mcp failed",
    ]
    for line in lines:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (line,), None)
        RedactingFilter(secrets).filter(record)
        printed = io.StringIO()
        RedactingStream(printed, secrets).write(line)
        for shown in (record.getMessage(), printed.getvalue()):
            assert SHORT not in shown and "[redacted]@" in shown
    # what is not a password stays: the user name, the host, a bare URL, an e-mail address
    plain = "redis://db:6379/0, http://parley@10.0.0.5, mail ana@example.com"
    printed = io.StringIO()
    RedactingStream(printed, secrets).write(plain)
    assert printed.getvalue() == plain


@pytest.mark.network
@pytest.mark.usefixtures("own_logging")
def test_doctor_shows_no_url_password_even_when_no_other_secret_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", f"redis://:{SHORT}@127.0.0.1:{free_port()}/0")
    monkeypatch.setenv("OLLAMA_HOST", f"http://parley:{SHORT}@127.0.0.1:{free_port()}")
    monkeypatch.setenv("PARLEY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PARLEY_HTTP_PORT", "0")
    monkeypatch.setenv("PARLEY_METRICS_PORT", "0")
    assert main(["--env-file", "/dev/null", "doctor"]) == 1  # nothing is reachable
    out, err = capsys.readouterr()
    assert "no Ollama at http://parley:[redacted]@127.0.0.1" in out
    assert SHORT not in out + err
    assert SHORT not in (tmp_path / "data" / "doctor.log").read_text()


FERNET = "q9VbQmZ3c2VjcmV0LWtleS1mb3ItcGFybGV5LXRlc3Q="  # 32 bytes, URL-safe base64


def test_the_secret_key_is_a_configured_secret_like_every_secret_setting() -> None:
    settings = Settings.load(env_file=None, mcp={"PARLEY_SECRET_KEY": FERNET})
    assert FERNET in configured_secrets(settings)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key %s", (FERNET,), None)
    RedactingFilter(configured_secrets(settings)).filter(record)
    assert FERNET not in record.getMessage()


SEALED_CHILD = """
import os, subprocess, sys
from pathlib import Path
from bot.config import Settings
from bot.ops.secrets import configured_secrets, seal
seal(configured_secrets(Settings.load(env_file=None)))
child = subprocess.run(["env"], capture_output=True, text=True).stdout
own = Path("/proc/self/environ").read_bytes().decode(errors="replace")
print(int(sys.argv[1] in child), int(sys.argv[1] in own), int(os.environ["PARLEY_SECRET_KEY"] == sys.argv[1]))
"""


@pytest.mark.process
def test_the_secret_key_never_reaches_a_child_or_proc_environ() -> None:
    import os
    import subprocess
    import sys

    env = {"PATH": os.environ["PATH"], "PARLEY_SECRET_KEY": FERNET, "HOME": "/tmp"}
    done = subprocess.run(
        [sys.executable, "-c", SEALED_CHILD, FERNET],
        env=env,
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # not in a child's environment, blanked in /proc/<pid>/environ, still usable by Parley
    assert done.stdout.split() == ["0", "0", "1"]
