"""Counting a Redis client's round trips: each time a connection writes a command or a
pipeline to its socket is one, recorded with the commands it carried and the task that made
it (the coroutine's name), so a test can tell an objective's round trips from those of the
service's periodic loops. The client is a plain redis-py client whose connections are a
subclass that only records (`connection_class`, a documented parameter)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection

# What a connection sends for itself when it connects, not for its caller.
HANDSHAKE = {"CLIENT", "HELLO", "AUTH", "SELECT"}


@dataclass(frozen=True)
class Trip:
    task: str  # the qualified name of the coroutine the sending task runs
    commands: tuple[str, ...]  # command names, upper case, in the order sent


class TripLog(list[Trip]):
    def by(self, *tasks: str) -> list[tuple[str, ...]]:
        """The commands of each round trip made by tasks running one of `tasks`."""
        return [trip.commands for trip in self if trip.task in tasks]

    def tasks(self) -> set[str]:
        return {trip.task for trip in self}


@contextlib.asynccontextmanager
async def counted(redis_url: str) -> AsyncIterator[tuple[aioredis.Redis, TripLog]]:
    """A client that records its round trips in the log it yields with it."""
    log = TripLog()

    class Counting(Connection):
        _names: tuple[str, ...] = ()

        def pack_command(self, *args: Any) -> Any:
            self._names = _names([args])
            return super().pack_command(*args)

        def pack_commands(self, commands: Iterable[Any]) -> Any:
            commands = list(commands)
            packed = super().pack_commands(commands)  # packs each one through pack_command
            self._names = _names(commands)
            return packed

        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            names = self._names
            if names and not set(names) <= HANDSHAKE:
                log.append(Trip(task=_running_coroutine(), commands=names))
            await super().send_packed_command(command, check_health)

    client = aioredis.Redis.from_url(redis_url, connection_class=Counting)
    try:
        yield client, log
    finally:
        await client.aclose()


def _names(commands: Iterable[Any]) -> tuple[str, ...]:
    names = []
    for args in commands:
        name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        names.append(name.split()[0].upper())
    return tuple(names)


def _running_coroutine() -> str:
    task = asyncio.current_task()
    coroutine = task.get_coro() if task is not None else None
    return getattr(coroutine, "__qualname__", "")
