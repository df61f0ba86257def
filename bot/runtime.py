"""The worker side assembled: inbox, conductor, workers and the reminder loop on one Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis.asyncio as aioredis

from adapters.base import ChatAdapter, OutboundMessage
from agent.loop import Agent
from agent.outcomes import Outcome
from agent.protocols import MemoryStore, Scheduler
from bot import metrics
from bot.commands import Commands, UsageText
from bot.conductor import Admission, Charge, Conductor
from bot.config import Settings
from bot.decisions import DecisionStore
from bot.inbox import Inbox
from bot.keys import Keys
from bot.locks import ConversationLocks
from bot.outbox import Outbox
from bot.scheduler import ReminderScheduler
from bot.sessions import SessionStore
from bot.worker import Worker

log = logging.getLogger(__name__)

AgentFactory = Callable[[Scheduler], Agent]


@dataclass(kw_only=True)
class Runtime:
    keys: Keys
    inbox: Inbox
    decisions: DecisionStore
    sessions: SessionStore
    outbox: Outbox
    scheduler: ReminderScheduler
    conductor: Conductor
    worker: Worker
    drain_timeout: float

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then drain in-flight runs and return."""
        consumer = asyncio.create_task(self.worker.run())
        reminders = asyncio.create_task(self.scheduler.run(stop))
        gauges = asyncio.create_task(self._sample_gauges(stop))
        try:
            await stop.wait()
        finally:
            self.worker.stop()
            await self.worker.drain(self.drain_timeout)
            for task in (consumer, reminders, gauges):
                task.cancel()
            for task in (consumer, reminders, gauges):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _sample_gauges(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                for kind in ("question", "approval"):
                    count = await self.decisions.count_pending(kind)
                    metrics.PENDING_DECISIONS.labels(kind).set(count)
            except (ConnectionError, OSError, aioredis.ConnectionError):
                log.debug("could not sample pending decisions")
            await sleep_unless(stop, 5.0)


async def sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    """Sleep, but wake as soon as `stop` is set (a loop's only pause, so stopping is prompt)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


def build_runtime(
    redis: aioredis.Redis,
    settings: Settings,
    adapters: dict[str, ChatAdapter],
    make_agent: AgentFactory,
    *,
    memory: MemoryStore | None = None,
    admission: Admission | None = None,
    charge: Charge | None = None,
    usage: UsageText | None = None,
    after_run: Callable[[Outcome], Awaitable[OutboundMessage | None]] | None = None,
    poll: float = 1.0,
) -> Runtime:
    runtime_settings = settings.runtime
    keys = Keys(settings.redis.key_prefix)
    outbox = Outbox(redis, keys, ttl=runtime_settings.dedup_ttl)
    scheduler = ReminderScheduler(redis, keys, outbox, adapters, poll=poll)
    sessions = SessionStore(redis, keys, ttl=runtime_settings.session_ttl)
    decisions = DecisionStore(redis, keys, ttl=runtime_settings.decision_ttl)
    locks = ConversationLocks(
        redis, keys, lease=runtime_settings.lock_lease, fence_ttl=runtime_settings.session_ttl
    )
    conductor = Conductor(
        agent=make_agent(scheduler),
        adapters=adapters,
        sessions=sessions,
        decisions=decisions,
        outbox=outbox,
        commands=Commands(memory, usage),
        approvers=frozenset(settings.access.approvers),
        max_message_chars=settings.agent.max_message_chars,
        admission=admission,
        charge=charge,
        after_run=after_run,
    )
    worker = Worker(
        redis,
        keys,
        locks,
        conductor.handle,
        on_error=conductor.fail_quietly,
        concurrency=runtime_settings.concurrency,
        reclaim_idle=runtime_settings.reclaim_idle,
        backlog_ttl=runtime_settings.session_ttl,
    )
    return Runtime(
        keys=keys,
        inbox=Inbox(redis, keys, dedup_ttl=runtime_settings.dedup_ttl),
        decisions=decisions,
        sessions=sessions,
        outbox=outbox,
        scheduler=scheduler,
        conductor=conductor,
        worker=worker,
        drain_timeout=runtime_settings.drain_timeout,
    )
