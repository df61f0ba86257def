"""Parley runs with a read-only root filesystem, writing only to HOME and TMPDIR: the two
directories the image declares as volumes (emptyDir in Kubernetes, tmpfs in compose)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.telegram import FakeTelegram
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = os.path.realpath(sys.prefix)
# Everything but the two writable directories, read-only in a private mount namespace.
SCRIPT = r"""
set -e
for d in /usr /etc /opt /var /root "$VENV" "$PROJECT"; do
  [ -d "$d" ] && mount --bind "$d" "$d" && mount -o remount,bind,ro "$d"
done
if touch "$PROJECT/.write-test" 2>/dev/null; then echo "the project is writable"; exit 3; fi
cd "$PROJECT"
exec "$@"
"""


def can_make_read_only_mounts() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount --bind / / 2>&1"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


@pytest.mark.skipif(
    not can_make_read_only_mounts(), reason="needs private mount namespaces (root, unshare)"
)
@pytest.mark.parametrize("role", ["worker", "gateway"])
async def test_parley_runs_on_a_read_only_root(role: str, redis_url: str, tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:  # a gateway is ready only with a platform to serve
        await runs_on_a_read_only_root(role, redis_url, tmp_path, telegram)


async def runs_on_a_read_only_root(
    role: str, redis_url: str, tmp_path: Path, telegram: FakeTelegram
) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "REDIS_URL": redis_url,
        "PARLEY_METRICS_PORT": str(port),
        "PARLEY_HTTP_PORT": "0",
        "OLLAMA_HOST": f"http://127.0.0.1:{free_port()}",
        "VENV": VENV,
        "PROJECT": str(ROOT),
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url,
    }
    process = await asyncio.create_subprocess_exec(
        "unshare",
        "-m",
        "--propagation",
        "private",
        "bash",
        "-c",
        SCRIPT,
        "parley",
        sys.executable,
        "-m",
        "bot.cli",
        "--env-file",
        "/dev/null",
        role,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with aiohttp.ClientSession() as http, asyncio.timeout(60):
            while True:
                assert process.returncode is None, await process.stdout.read()  # type: ignore[union-attr]
                try:
                    answer = await http.get(f"http://127.0.0.1:{port}/readyz")
                    if answer.status == 200:
                        break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
    finally:
        if process.returncode is None:
            process.terminate()
        output = (await process.communicate())[0].decode()
    assert process.returncode == 0, output
    assert "Read-only file system" not in output and "Errno 30" not in output
