"""What the agent needs from the world, as small protocols the memory package and the bot satisfy.

`RunContext` says who asked and where, in platform-neutral strings; memory scopes derive from
it so that one person's private memories never reach another person's objective.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

MemoryKind = Literal["fact", "preference", "episode", "instruction"]
Share = Literal["private", "chat", "team"]
# "remembered": someone asked for it, so it is kept until someone forgets it; "extracted":
# picked by end-of-run extraction, which may make room by dropping its own older picks.
Origin = Literal["remembered", "extracted"]
SCOPE_LABELS = {"user": "private", "chat": "channel", "team": "team"}


class MemoryFull(Exception):
    """A scope holds as many memories as it may; nothing was evicted to make room."""

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(f"{scope} holds its limit of {limit} memories")
        self.scope = scope
        self.limit = limit


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Who an objective comes from and where it lives."""

    conversation_id: str  # opaque to the agent; the bot uses it to route replies
    platform: str
    user_id: str
    chat_id: str
    team_id: str | None = None
    # The organisation the person's team belongs to (Slack Enterprise Grid), when the platform
    # says it is theirs; with `org_team`, it is the team that team-wide memories are shared with.
    org_id: str | None = None
    org_team: bool = False
    is_direct: bool = True
    user_name: str = ""
    # the platform groups the person belongs to (Slack user groups), when known: an approver
    # may be one through a group, for what the run does on someone else's behalf
    groups: tuple[str, ...] = ()
    timezone: str | None = None  # the user's IANA zone, when the platform says (Slack tz)
    # Side-effecting tools the user approved in advance for this run (a schedule's standing
    # permission): they run without asking again.
    standing: tuple[str, ...] = ()
    # False when the run acts in the user's name without their asking (a trigger's owner):
    # its text is anyone's, so neither their standing approvals nor their own accounts hold.
    asked: bool = True
    # True when nobody watches the run as it goes (a schedule's slot, a trigger): the person's
    # "Always" approvals do not hold there; only what a schedule was granted when it was
    # approved (`standing`) runs unasked.
    unattended: bool = False

    @property
    def user_scope(self) -> str:
        return f"user:{self.platform}:{self.user_id}"

    @property
    def chat_scope(self) -> str:
        return f"chat:{self.platform}:{self.chat_id}"

    @property
    def team_scope(self) -> str | None:
        """Where memories shared with the team go: the organisation's scope when it is the
        team, else the workspace's."""
        if self.org_team and self.org_id:
            return f"team:{self.platform}:{self.org_id}"
        return f"team:{self.platform}:{self.team_id}" if self.team_id else None

    def team_scopes(self) -> list[str]:
        """Every team scope this person reads: the one writes go to, then the other of the
        workspace's and the organisation's, so that switching what a team means loses none."""
        found = [self.team_scope] if self.team_scope else []
        for team in (self.team_id, self.org_id):
            scope = f"team:{self.platform}:{team}" if team else None
            if scope and scope not in found:
                found.append(scope)
        return found

    def readable_scopes(self) -> list[str]:
        """A DM sees the user's own and their team's memories; a shared chat, its own and the team's."""
        own = self.user_scope if self.is_direct else self.chat_scope
        return [own] + self.team_scopes()

    def write_scope(self, share: Share | None = None) -> str:
        """Where a new memory goes. Unsaid: this conversation's own scope (private in a DM,
        the chat's in a shared one); "private" is the user's own wherever it is said, so it
        is never heard by the others in a shared chat (it is recalled in their DMs)."""
        if share == "team" and self.team_scope:
            return self.team_scope
        if share == "private" or self.is_direct:  # a direct chat's "chat" is the user
            return self.user_scope
        return self.chat_scope

    def is_shared_scope(self, scope: str) -> bool:
        """Whether others than this user may see memories in `scope`."""
        return scope != self.user_scope


@dataclass(frozen=True, kw_only=True)
class MemoryRecord:
    id: str
    text: str
    kind: MemoryKind
    scope: str
    author: str  # user id of who it was learned from
    source_conversation: str
    created_at: float
    last_used_at: float
    distance: float | None = None  # set by recall
    origin: Origin = "remembered"
    author_name: str = ""  # as the platform named them when it was learned
    corrected_at: float | None = None  # last corrected in place

    @property
    def scope_label(self) -> str:
        """private, channel or team: who can see it."""
        return SCOPE_LABELS.get(self.scope.split(":", 1)[0], self.scope)


@dataclass(frozen=True, kw_only=True)
class MemoryPage:
    """One page of what a conversation may see, newest first."""

    records: list[MemoryRecord]
    total: int
    offset: int = 0

    @property
    def has_more(self) -> bool:
        return self.offset + len(self.records) < self.total


class Recall(Protocol):
    async def recall(
        self, query: str, context: RunContext, k: int | None = None
    ) -> list[MemoryRecord]:
        """The memories most relevant to `query` that `context` may see, best first."""
        ...


class MemoryStore(Recall, Protocol):
    async def remember(
        self,
        text: str,
        context: RunContext,
        *,
        kind: MemoryKind = "fact",
        share: Share | None = None,
        origin: Origin = "remembered",
    ) -> MemoryRecord:
        """Store a memory in the scope `share` picks (`RunContext.write_scope`), or update
        this user's own near-duplicate there; another author's memory is never changed.

        Raises MemoryFull when the scope is at its limit and nothing may make room.
        """
        ...

    async def list_memories(
        self, context: RunContext, *, offset: int = 0, limit: int = 20
    ) -> MemoryPage:
        """What this conversation may see (own or channel, and team), newest first."""
        ...

    async def removable(self, context: RunContext, memory_id: str) -> MemoryRecord | None:
        """The memory with this id if this user may forget it here (visible here, and theirs
        or private to them), else None."""
        ...

    async def correct(self, context: RunContext, memory_id: str, text: str) -> MemoryRecord | None:
        """Replace the text of a memory this user may forget here, keeping where and when it
        was learned; None when there is no such memory."""
        ...

    async def instructions(self, context: RunContext) -> list[MemoryRecord]:
        """The standing instructions every run in this conversation follows, oldest first."""
        ...

    async def used(self, context: RunContext) -> list[MemoryRecord]:
        """The memories recall last gave this conversation (what led its last answer)."""
        ...

    async def recalled(self, context: RunContext) -> list[MemoryRecord]:
        """The memories recall gave this conversation lately (its last few recalls), newest
        first, those it may still see."""
        ...

    async def forget(self, context: RunContext, memory_id: str | None = None) -> int:
        """Forget one visible memory this user may remove, or all of them when memory_id is
        None; returns how many."""
        ...


class Scheduler(Protocol):
    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        """Post `text` into the context's conversation at `due_at` (epoch seconds); returns an id."""
        ...


@dataclass(frozen=True, kw_only=True)
class ScheduleInfo:
    """One recurring objective, as its owner and the model see it."""

    id: str
    when: str
    objective: str
    timezone: str
    state: str  # "active" or "paused"
    owner_id: str
    owner_name: str
    conversation_id: str
    next_run: float | None = None  # epoch seconds
    standing: tuple[str, ...] = ()
    note: str = ""  # why it is paused, when it is


class ScheduleRefused(Exception):
    """A schedule could not be made or changed; the message says why, for the model."""


@runtime_checkable
class ScheduleBook(Protocol):
    """Recurring objectives that run as their owner in the conversation they were made in."""

    async def create_schedule(
        self,
        when: str,
        objective: str,
        timezone: str,
        standing: tuple[str, ...],
        context: RunContext,
    ) -> ScheduleInfo:
        """Store a schedule (ScheduleRefused when `when` or the zone is unusable)."""
        ...

    async def list_schedules(self, context: RunContext) -> list[ScheduleInfo]:
        """The schedules of the context's conversation."""
        ...

    async def cancellable(self, schedule_id: str, context: RunContext) -> ScheduleInfo:
        """The schedule, if the context's requester may cancel it (ScheduleRefused when it
        is not there or not theirs to cancel); nothing changes."""
        ...

    async def cancel_schedule(self, schedule_id: str, context: RunContext) -> ScheduleInfo:
        """Delete one of the conversation's schedules, stopping every later run
        (ScheduleRefused when it is not there or not theirs to cancel)."""
        ...


@dataclass(frozen=True, kw_only=True)
class ProgressEvent:
    # text_delta: detail["text"] of the turn being written; text_reset: what was written is
    # void (a tool call follows; detail["status"] is that text as a short status line)
    # tool_progress: detail["status"], a running tool's own word on how far it is
    kind: Literal[
        "step_started", "tool_started", "tool_progress", "tool_finished", "text_delta", "text_reset"
    ]
    step: int
    tool: str | None = None
    detail: dict[str, str] = field(default_factory=dict)


ProgressCallback = Callable[[ProgressEvent], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class JournalEntry:
    """What the journal holds for one approved call: started, and perhaps finished."""

    finished: bool
    content: str = ""
    is_error: bool = False


class JournalUnavailable(Exception):
    """The journal could not record that an approved call starts. The run stops without an
    outcome (the call did not run), so the host can handle the event again later instead of
    telling the user it failed and losing their approval."""


class ToolJournal(Protocol):
    """A durable record of approved side-effecting calls, so that a replay never repeats one.

    `call` names one attempt of one call of the run (its tool-call id, with the attempt number
    appended for an approved retry).
    """

    async def begin(self, context: RunContext, run_id: str, call: str) -> JournalEntry | None:
        """Record that `call` starts; if it was recorded before, change nothing and return that.
        Raises JournalUnavailable when the store cannot be reached."""
        ...

    async def finish(
        self, context: RunContext, run_id: str, call: str, entry: JournalEntry
    ) -> None:
        """Record how `call` ended."""
        ...


class StandingApprovals(Protocol):
    """Side-effecting tools a person approved for good ("Always for this tool").

    `digest` is the tool's `standing_digest`: an approval covers the tool only as it was
    shown when it was given. A store that cannot be reached covers nothing (the call is put
    to the person as usual)."""

    async def covers(self, context: RunContext, tool: str, digest: str) -> bool:
        """Whether the requester of `context` approved `tool` (as `digest`) for good here."""
        ...
