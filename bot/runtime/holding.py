"""What the holder of a conversation's lock carries (`bot/runtime/locks.py` takes and lets
go of the lock): the lease that proves it, what the holder knows of its conversation, and
the writes and acknowledgements that wait for its next round trip; and `while_held`, which
stops work as soon as the lease is found lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator

from redis.asyncio.client import Pipeline

from bot.runtime.keys import entry_of
from bot.runtime.reclaimer import GROUP


class LockLost(Exception):
    """The lease ran out and another worker may hold the conversation now."""


class Lease:
    """A held conversation lock: `value` proves it, `token` orders holders.

    It also carries what the holder knows of its conversation: the session as last stored
    (raw JSON, None if there is none) and the backlog's oldest member as last seen; the
    entries it was told are untried and has not tried yet (no earlier attempt can have left
    anything behind for them); writes that may wait for its next session save, so that they
    share its round trip (key → value, ttl in ms); and the handled entries whose sessions
    are stored, acknowledged with its next write (`riding`). The session save that stores
    `let_go_after` lets go of the lock if no entry waits (`released`)."""

    def __init__(
        self,
        conversation_id: str,
        value: str,
        token: int,
        *,
        session: bytes | None = None,
        head: bytes | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.value = value
        self.token = token
        self.session = session
        self.head = head
        self.done: bytes | None = None  # the backlog member the last session save took off
        self.remaining = 0  # entries left on the backlog at release
        self.kept = False  # the last release kept the lock: entries wait (`head` is next)
        self.untried: set[str] = set()
        self.tries: dict[str, int] = {}  # entry → tries begun, this one included (see locks.py)
        self.records: dict[str, tuple[str, int]] = {}
        self.acks: list[str] = []
        self.let_go_after: bytes | None = None  # the backlog member being handled
        self.letting_go = False  # a session save that may let go of the lock is under way
        self.released = False  # a session save let go of the lock (nothing waited)
        self._lost = asyncio.Event()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @lost.setter
    def lost(self, value: bool) -> None:
        if value:
            self._lost.set()
        else:
            self._lost.clear()

    async def wait_lost(self) -> None:
        await self._lost.wait()

    def next_up(self, head: bytes | str | None, untried: object = 0, tries: int = 0) -> None:
        """Note the backlog's oldest member as Redis said it, whether it was untried, and
        how many tries of it have begun (this holder's included)."""
        self.head = head.encode() if isinstance(head, str) else head
        if head and untried:
            self.untried.add(entry_of(head))
        if head and tries:
            self.tries[entry_of(head)] = tries

    @contextlib.contextmanager
    def riding(self, pipe: Pipeline, inbox: str) -> Iterator[None]:
        """Queue the waiting acknowledgements into `pipe`, whose round trip the block makes;
        they wait for the next one if it fails (acknowledging twice is harmless)."""
        acks, self.acks = self.acks, []
        if acks:
            pipe.xack(inbox, GROUP, *acks)
        try:
            yield
        except BaseException:
            self.acks[:0] = acks
            raise


async def while_held(lease: Lease, work: Awaitable[None]) -> None:
    """Await `work`, stopped with LockLost as soon as the lease is found lost: a new holder
    handles the entry again, and a stale run must not answer before it."""
    task = asyncio.ensure_future(work)
    lost = asyncio.ensure_future(lease.wait_lost())
    try:
        await asyncio.wait((task, lost), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        lost.cancel()
        await asyncio.gather(task, lost, return_exceptions=True)
    if task.cancelled():
        raise LockLost(lease.conversation_id)
    task.result()
