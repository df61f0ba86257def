"""What `parley doctor` checks about the process itself: the addresses it listens on and
Redis. Each check returns a `Check`: a status, what was found and what to do about it."""

from __future__ import annotations

import asyncio
import errno
import socket
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from bot.config import Settings

Status = Literal["ok", "fail", "warn", "not configured"]
CHECK_TIMEOUT = 10.0


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def line(self) -> str:
        text = f"{self.status:<15} {self.name:<10} {self.detail}"
        return f"{text}\n{'':<26} -> {self.hint}" if self.hint else text


CheckFn = Callable[[Settings], Awaitable[Check]]


async def check_http(settings: Settings) -> Check:
    """Both listeners' addresses must be free, or `parley run` stops at start."""
    listeners = [
        (settings.http.host, settings.http.port, "PARLEY_HTTP_PORT"),
        (settings.http.metrics_host, settings.http.metrics_port, "PARLEY_METRICS_PORT"),
    ]
    for host, port, setting in listeners:
        if port == 0:
            continue
        try:
            with socket.create_server((host, port)):
                pass
        except OSError as exc:
            detail = (
                f"{host}:{port} is already in use"
                if exc.errno == errno.EADDRINUSE
                else f"cannot listen on {host}:{port} ({exc.strerror})"
            )
            return Check(
                name="http",
                status="fail",
                detail=detail,
                hint=f"stop whatever listens there (or Parley already runs), or set {setting}",
            )
    ports = " and ".join(f"{h}:{p}" for h, p, _ in listeners)
    return Check(name="http", status="ok", detail=f"{ports} are free to listen on")


async def check_redis(settings: Settings) -> Check:
    if settings.redis.url is None:
        return await asyncio.to_thread(_check_embedded_redis, settings)
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(
        settings.redis.url, password=settings.redis.password_text, socket_connect_timeout=3
    )
    try:
        await client.ping()
        modules = {m[b"name"].decode().lower(): m[b"ver"] for m in await client.module_list()}
    except Exception as exc:
        return Check(
            name="redis",
            status="fail",
            detail=f"cannot reach REDIS_URL ({type(exc).__name__}: {exc})",
            hint="start Redis 8 or Redis Stack there, or unset REDIS_URL to use the embedded one",
        )
    finally:
        await client.aclose()
    if "search" not in modules:
        return Check(
            name="redis",
            status="fail",
            detail="reachable, but the search module is missing (memory needs it)",
            hint="use Redis 8 or Redis Stack (redis/redis-stack-server), not plain Redis 7",
        )
    return Check(name="redis", status="ok", detail=f"reachable, search module {modules['search']}")


def _check_embedded_redis(settings: Settings) -> Check:
    from bot.ops.embedded_redis import SETUP_HINT, EmbeddedRedis

    embedded = EmbeddedRedis(settings.redis.data_dir, server=settings.redis.server)
    if embedded.server is None or not embedded.server.exists():
        return Check(
            name="redis",
            status="fail",
            detail="no REDIS_URL and no bundled server",
            hint=SETUP_HINT,
        )
    result = subprocess.run(
        [str(embedded.server), "--version"],
        env=embedded.environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return Check(
            name="redis",
            status="fail",
            detail=f"the bundled server does not run: {result.stderr.strip()[:200]}",
            hint=SETUP_HINT,
        )
    return Check(
        name="redis",
        status="ok",
        detail=f"embedded Redis Stack will run under {settings.redis.data_dir}",
    )
