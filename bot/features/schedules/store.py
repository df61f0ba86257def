"""Schedules: recurring objectives kept in Redis, each run as its owner in its conversation.

A schedule is one JSON record (`schedule:<id>`), listed in `schedules:all`, in its
conversation's set and in its owner's. An active one sits in the `due` sorted set scored by
its next slot (epoch seconds); pausing takes it out (into `paused`), resuming puts it back at
the first slot after now, deleting removes it everywhere. A schedule paused because its owner
or its chat is gone expires after `orphan_ttl` unless resumed; a listing that meets an id
whose record is gone takes it out of the sets. Starting due slots is `clock.py`'s job.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Literal

import redis.asyncio as aioredis

from agent.protocols import RunContext, ScheduleInfo, ScheduleRefused
from agent.recurrence import Recurrence, RecurrenceError, check, zone_of
from bot.runtime.codec import Codec, as_text
from bot.runtime.keys import Keys
from bot.runtime.permissions import may_act

log = logging.getLogger(__name__)

State = Literal["active", "paused"]
MAX_PER_CONVERSATION = 50
ORPHAN_TTL = 30 * 86_400.0  # seconds a schedule paused for its owner's or chat's sake is kept


@dataclass(kw_only=True)
class Schedule:
    id: str
    when: str
    objective: str
    timezone: str
    owner_id: str
    owner_name: str
    platform: str
    conversation_id: str
    team_id: str | None = None
    org_id: str | None = None  # the owner's organisation, for team memories shared org-wide
    is_direct: bool = True
    standing: tuple[str, ...] = ()
    anchor: int = 0  # epoch seconds interval slots count from
    created_at: float = field(default_factory=time.time)
    state: State = "active"
    note: str = ""  # why it is paused

    def lives_in(self, conversation_id: str) -> bool:
        """Whether it belongs to the chat of `conversation_id` (any of its threads)."""
        return chat_of(self.conversation_id) == chat_of(conversation_id)

    @property
    def recurrence(self) -> Recurrence:
        return Recurrence.parse(self.when)

    def next_after(self, moment: float) -> int:
        return int(self.recurrence.next_after(moment, zone_of(self.timezone), self.anchor))

    def encode(self) -> bytes:
        return RECORD.encode(self)

    @classmethod
    def decode(cls, raw: str | bytes) -> Schedule:
        return RECORD.decode(raw)

    def info(self, next_run: float | None) -> ScheduleInfo:
        return ScheduleInfo(
            id=self.id,
            when=self.when,
            objective=self.objective,
            timezone=self.timezone,
            state=self.state,
            owner_id=self.owner_id,
            owner_name=self.owner_name,
            conversation_id=self.conversation_id,
            next_run=next_run,
            standing=self.standing,
            note=self.note,
        )


RECORD: Codec[Schedule] = Codec(Schedule)


@dataclass(eq=False)
class ScheduleStore:
    """The schedules, and the agent's `ScheduleBook` for the conversation a run is in."""

    redis: aioredis.Redis
    keys: Keys
    _: KW_ONLY
    min_interval: float = 60.0
    approvers: frozenset[str] = frozenset()
    per_owner: int = 20
    orphan_ttl: float = ORPHAN_TTL

    # --- the agent's book -----------------------------------------------------------------

    async def create_schedule(
        self,
        when: str,
        objective: str,
        timezone: str,
        standing: tuple[str, ...],
        context: RunContext,
    ) -> ScheduleInfo:
        now = time.time()
        try:
            check(when, timezone, self.min_interval, now)
        except RecurrenceError as exc:
            raise ScheduleRefused(str(exc)) from None
        if not objective.strip():
            raise ScheduleRefused("A schedule needs an objective.")
        count = await self.redis.scard(self.keys.schedules_in(chat_of(context.conversation_id)))
        if count >= MAX_PER_CONVERSATION:
            raise ScheduleRefused(
                f"This conversation has {count} schedules, the most it may have; cancel one first."
            )
        owned = len(await self._owned(context.platform, context.user_id))
        if owned >= self.per_owner:
            raise ScheduleRefused(
                f"You have {owned} schedules, the most one person may have; cancel one first."
            )
        made = Schedule(
            id=uuid.uuid4().hex[:8],
            when=Recurrence.parse(when).when,
            objective=objective.strip(),
            timezone=timezone,
            owner_id=context.user_id,
            owner_name=context.user_name,
            platform=context.platform,
            conversation_id=context.conversation_id,
            team_id=context.team_id,
            org_id=context.org_id,
            is_direct=context.is_direct,
            standing=standing,
            anchor=int(now),
        )
        first = made.next_after(now)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.schedule(made.id), made.encode())
            pipe.sadd(self.keys.schedules_all, made.id)
            pipe.sadd(self.keys.schedules_in(chat_of(made.conversation_id)), made.id)
            pipe.sadd(self.keys.schedules_of(made.platform, made.owner_id), made.id)
            pipe.zadd(self.keys.schedules_due, {made.id: first})
            await pipe.execute()
        log.info("schedule %s made in %s (%s)", made.id, made.conversation_id, made.when)
        return made.info(first)

    async def list_schedules(self, context: RunContext) -> list[ScheduleInfo]:
        return [s.info(n) for s, n in await self.in_chat(context.conversation_id)]

    async def cancellable(self, schedule_id: str, context: RunContext) -> ScheduleInfo:
        return (await self._cancellable(schedule_id, context)).info(None)

    async def cancel_schedule(self, schedule_id: str, context: RunContext) -> ScheduleInfo:
        found = await self._cancellable(schedule_id, context)
        await self.delete(found)
        return found.info(None)

    async def _cancellable(self, schedule_id: str, context: RunContext) -> Schedule:
        found = await self.get(schedule_id)
        if found is None or not found.lives_in(context.conversation_id):
            raise ScheduleRefused(f"There is no schedule {schedule_id!r} in this conversation.")
        if not self.may_manage(found, context.user_id, context.groups):
            raise ScheduleRefused(
                f"Only {found.owner_name or found.owner_id} or an approver may cancel it."
            )
        return found

    # --- records --------------------------------------------------------------------------

    def may_manage(self, found: Schedule, user_id: str, groups: Iterable[str]) -> bool:
        """Its owner, and configured approvers (ids or groups): who may act for its owner.
        Managed only where it lives (`lives_in`): in a private chat, only its owner is there."""
        return may_act(user_id, tuple(groups), found.owner_id, False, self.approvers)

    async def get(self, schedule_id: str) -> Schedule | None:
        raw = await self.redis.get(self.keys.schedule(schedule_id))
        return Schedule.decode(raw) if raw is not None else None

    async def many(self, ids: list[str], *named_in: str) -> list[tuple[Schedule, float | None]]:
        """Schedules by id (those that exist), each with its next slot (None when paused); an
        id whose record is gone leaves the sets, `named_in` (the set it was read from) too."""
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.mget([self.keys.schedule(i) for i in ids])
            for schedule_id in ids:
                pipe.zscore(self.keys.schedules_due, schedule_id)
            raws, *slots = await pipe.execute()
        found = [(Schedule.decode(raw), slot) for raw, slot in zip(raws, slots, strict=True) if raw]
        if gone := [i for i, raw in zip(ids, raws, strict=True) if raw is None]:
            await self._forget(gone, named_in)
        return sorted(found, key=lambda pair: pair[0].created_at)

    async def _owned(self, platform: str, owner_id: str) -> list[str]:
        """The ids of a person's schedules that still exist."""
        key = self.keys.schedules_of(platform, owner_id)
        ids = await self.redis.smembers(key)
        return [s.id for s, _ in await self.many(sorted(as_text(i) for i in ids), key)]

    async def _forget(self, ids: list[str], named_in: tuple[str, ...]) -> None:
        """Ids whose record expired (orphaned and never resumed) leave the sets naming them:
        every-schedule ones here, a chat's or an owner's when it is the one read."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in named_in:
                pipe.srem(key, *ids)
            pipe.srem(self.keys.schedules_all, *ids)
            pipe.srem(self.keys.schedules_paused, *ids)
            pipe.zrem(self.keys.schedules_due, *ids)
            pipe.zrem(self.keys.schedules_claimed, *ids)
            await pipe.execute()
        log.info("forgot %d schedule id(s) whose record expired", len(ids))

    async def in_chat(self, conversation_id: str) -> list[tuple[Schedule, float | None]]:
        """The schedules of the chat a conversation is in, its threads' included (a Slack
        channel's `/parley schedules` shows those made in its threads)."""
        key = self.keys.schedules_in(chat_of(conversation_id))
        ids = await self.redis.smembers(key)
        return await self.many(sorted(as_text(i) for i in ids), key)

    async def everything(self) -> list[tuple[Schedule, float | None]]:
        ids = await self.redis.smembers(self.keys.schedules_all)
        return await self.many(sorted(as_text(i) for i in ids))

    async def pause(self, found: Schedule, note: str = "", *, orphaned: bool = False) -> Schedule:
        """Take it off the clock. `orphaned`: its owner or chat is gone, so unless someone
        resumes it within `orphan_ttl` it goes for good."""
        paused = replace(found, state="paused", note=note)
        ttl = int(self.orphan_ttl * 1000) if orphaned else None
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.schedule(found.id), paused.encode(), xx=True, px=ttl)
            pipe.zrem(self.keys.schedules_due, found.id)
            pipe.zrem(self.keys.schedules_claimed, found.id)  # a clock may be starting it
            pipe.sadd(self.keys.schedules_paused, found.id)
            await pipe.execute()
        log.info("schedule %s paused", found.id)
        return paused

    async def resume(self, found: Schedule) -> tuple[Schedule, int]:
        active = replace(found, state="active", note="")
        first = active.next_after(time.time())
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.schedule(found.id), active.encode(), xx=True)
            pipe.srem(self.keys.schedules_paused, found.id)
            pipe.zadd(self.keys.schedules_due, {found.id: first})
            await pipe.execute()
        log.info("schedule %s resumed", found.id)
        return active, first

    async def delete(self, found: Schedule) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.schedule(found.id))
            pipe.zrem(self.keys.schedules_due, found.id)
            pipe.zrem(self.keys.schedules_claimed, found.id)  # a clock may be starting it
            pipe.srem(self.keys.schedules_paused, found.id)
            pipe.srem(self.keys.schedules_all, found.id)
            pipe.srem(self.keys.schedules_in(chat_of(found.conversation_id)), found.id)
            pipe.srem(self.keys.schedules_of(found.platform, found.owner_id), found.id)
            await pipe.execute()
        log.info("schedule %s deleted", found.id)

    async def counts(self) -> dict[str, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcard(self.keys.schedules_due)
            pipe.zcard(self.keys.schedules_claimed)
            pipe.scard(self.keys.schedules_paused)
            due, starting, paused = await pipe.execute()
        return {"active": int(due) + int(starting), "paused": int(paused)}


def chat_of(conversation_id: str) -> str:
    """A conversation id without its thread: platform, team and chat."""
    return conversation_id.rsplit(":", 1)[0]


def listed(found: list[tuple[Schedule, float | None]]) -> list[str]:
    """Every schedule on a line of its own, for an operator (`parley schedules`)."""
    if not found:
        return ["no schedules"]
    lines = [
        f"{len(found)} schedule(s): id  state  next run (UTC)  owner  conversation  when  objective"
    ]
    for item, next_run in found:
        upcoming = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(next_run)) if next_run else "-"
        lines.append(
            f"{item.id}  {item.state}  {upcoming}  {item.owner_name or '-'} ({item.owner_id})  "
            f"{item.conversation_id}  {item.when} [{item.timezone}]  {item.objective[:80]!r}"
        )
    return lines


class BookOf:
    """The `ScheduleBook` of an agent's scheduler that also sets reminders: the agent finds
    both on one object (agent/schedule_tools.py), so the schedule methods are `book`'s."""

    book: ScheduleStore | None

    def _book(self) -> ScheduleStore:
        if self.book is None:
            raise ScheduleRefused("Schedules are not available here.")
        return self.book

    async def create_schedule(
        self,
        when: str,
        objective: str,
        timezone: str,
        standing: tuple[str, ...],
        context: RunContext,
    ) -> ScheduleInfo:
        return await self._book().create_schedule(when, objective, timezone, standing, context)

    async def list_schedules(self, context: RunContext) -> list[ScheduleInfo]:
        return await self._book().list_schedules(context)

    async def cancellable(self, schedule_id: str, context: RunContext) -> ScheduleInfo:
        return await self._book().cancellable(schedule_id, context)

    async def cancel_schedule(self, schedule_id: str, context: RunContext) -> ScheduleInfo:
        return await self._book().cancel_schedule(schedule_id, context)
