"""What the holder of a conversation's lock carries (`bot/runtime/locks.py` takes and lets
go of the lock), as three named units with one owner each:

- `Fence`: the proof of holding, checked by every write of conversation state (locks.py
  makes it; nobody changes it).
- `Cursor`: where the holder stands on the conversation's backlog, as Redis last said (the
  worker drains by it; each round trip that reads the backlog moves it).
- `PendingWrites`: records of what was sent and acknowledgements of handled entries, which
  wait for the holder's next round trip and ride in it (the conversation layer adds records,
  the worker adds acknowledgements; `SessionStore.save` is handed them).

`Holding` groups them with the session as last stored and whether the lock is lost or let
go of; `while_held` stops work as soon as the lock is found lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field

from redis.asyncio.client import Pipeline

from bot.runtime.keys import entry_of
from bot.runtime.reclaimer import GROUP


class LockLost(Exception):
    """The lease ran out and another worker may hold the conversation now."""


@dataclass(frozen=True, kw_only=True)
class Fence:
    """A held conversation lock: `value` proves it (the lock key holds it), `token` orders
    holders (a later holder's is larger)."""

    conversation_id: str
    value: str
    token: int


@dataclass(kw_only=True)
class Cursor:
    """The holder's place on the backlog: its oldest member as last seen (`head`), the member
    the last session save took off (`done`), the entries told untried and not tried yet (no
    earlier attempt can have left anything behind for them), the tries begun of each entry
    (this one included), and the member being handled (`let_go_after`: its save lets go of
    the lock if no entry waits). After a release, `kept` says the lock was kept because
    entries wait, and `remaining` how many."""

    head: bytes | None = None
    done: bytes | None = None
    untried: set[str] = field(default_factory=set)
    tries: dict[str, int] = field(default_factory=dict)
    let_go_after: bytes | None = None
    kept: bool = False
    remaining: int = 0

    def next_up(self, head: bytes | str | None, untried: object = 0, tries: int = 0) -> None:
        """Note the backlog's oldest member as Redis said it, whether it was untried, and
        how many tries of it have begun (this holder's included)."""
        self.head = head.encode() if isinstance(head, str) else head
        if head and untried:
            self.untried.add(entry_of(head))
        if head and tries:
            self.tries[entry_of(head)] = tries


@dataclass(kw_only=True)
class PendingWrites:
    """Writes that wait for the holder's next round trip: records (key → value, ttl in ms),
    which go with the next session save, and acknowledgements of handled entries whose
    sessions are stored, which ride with any next write."""

    records: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    acks: list[str] = field(default_factory=list)

    def record(self, key: str, value: bytes, ttl_ms: int) -> None:
        self.records[key] = (value, ttl_ms)

    def take_records(self) -> dict[str, tuple[bytes, int]]:
        records, self.records = self.records, {}
        return records

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


class Holding:
    """One holder's hold on a conversation's lock: its `fence`, its `cursor`, its `writes`,
    and the session as last stored (raw JSON, None if there is none). `released`: a session
    save let go of the lock (nothing waited); `letting_go`: such a save is under way."""

    def __init__(self, fence: Fence, *, session: bytes | None = None) -> None:
        self.fence = fence
        self.cursor = Cursor()
        self.writes = PendingWrites()
        self.stored = session
        self.letting_go = False
        self.released = False
        self._lost = asyncio.Event()

    @property
    def conversation_id(self) -> str:
        return self.fence.conversation_id

    def first_try(self, entry_id: str) -> bool:
        """Whether `entry_id` is on its first try: nothing an earlier attempt left to find."""
        return entry_id in self.cursor.untried

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def lose(self) -> None:
        self._lost.set()

    async def wait_lost(self) -> None:
        await self._lost.wait()


async def while_held(holding: Holding, work: Awaitable[None]) -> None:
    """Await `work`, stopped with LockLost as soon as the lock is found lost: a new holder
    handles the entry again, and a stale run must not answer before it."""
    task = asyncio.ensure_future(work)
    lost = asyncio.ensure_future(holding.wait_lost())
    try:
        await asyncio.wait((task, lost), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        lost.cancel()
        await asyncio.gather(task, lost, return_exceptions=True)
    if task.cancelled():
        raise LockLost(holding.conversation_id)
    task.result()
