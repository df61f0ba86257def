"""In-process implementations of the memory, scheduler and journal protocols for agent tests.

The real ones live in `memory/` (RedisVL) and `bot/`; the agent only sees the protocols.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from agent.protocols import (
    JournalEntry,
    MemoryKind,
    MemoryPage,
    MemoryRecord,
    Origin,
    RunContext,
    Share,
)


@dataclass
class ListMemory:
    """A MemoryStore over a list: recall returns every visible record; records its queries."""

    records: list[MemoryRecord] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def recall(
        self, query: str, context: RunContext, k: int | None = None
    ) -> list[MemoryRecord]:
        self.queries.append(query)
        visible = [r for r in self.records if r.scope in context.readable_scopes()]
        return visible[: k or 5]

    async def remember(
        self,
        text: str,
        context: RunContext,
        *,
        kind: MemoryKind = "fact",
        share: Share | None = None,
        origin: Origin = "remembered",
    ) -> MemoryRecord:
        now = time.time()
        record = MemoryRecord(
            id=f"m{next(self._ids)}",
            text=text,
            kind=kind,
            scope=context.write_scope(share),
            author=context.user_id,
            source_conversation=context.conversation_id,
            created_at=now,
            last_used_at=now,
            origin=origin,
        )
        self.records.append(record)
        return record

    async def list_memories(
        self, context: RunContext, *, offset: int = 0, limit: int = 20
    ) -> MemoryPage:
        visible = [r for r in reversed(self.records) if r.scope in context.readable_scopes()]
        return MemoryPage(
            records=visible[offset : offset + limit], total=len(visible), offset=offset
        )

    async def removable(self, context: RunContext, memory_id: str) -> MemoryRecord | None:
        visible = [r for r in self.records if r.scope in context.readable_scopes()]
        return next((r for r in visible if r.id == memory_id), None)

    async def forget(self, context: RunContext, memory_id: str | None = None) -> int:
        doomed = [
            r
            for r in self.records
            if r.scope in context.readable_scopes() and memory_id in (None, r.id)
        ]
        self.records = [r for r in self.records if r not in doomed]
        return len(doomed)


@dataclass
class ListScheduler:
    reminders: list[tuple[str, float, RunContext]] = field(default_factory=list)

    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        self.reminders.append((text, due_at, context))
        return f"r{len(self.reminders)}"


@dataclass
class DictJournal:
    """A ToolJournal over a dict keyed by (run id, call)."""

    entries: dict[tuple[str, str], JournalEntry] = field(default_factory=dict)

    async def begin(self, context: RunContext, run_id: str, call: str) -> JournalEntry | None:
        earlier = self.entries.get((run_id, call))
        if earlier is None:
            self.entries[(run_id, call)] = JournalEntry(finished=False)
        return earlier

    async def finish(
        self, context: RunContext, run_id: str, call: str, entry: JournalEntry
    ) -> None:
        self.entries[(run_id, call)] = entry
