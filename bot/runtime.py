"""The worker side assembled: inbox, conductor, workers and the reminder loop on one Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis.asyncio as aioredis

from adapters.base import ChatAdapter
from agent.loop import Agent
from agent.outcomes import Outcome
from agent.protocols import MemoryStore, Scheduler
from bot import metrics
from bot.attachments import Gatherer
from bot.commands import Commands, UsageText
from bot.conductor import Admission, Charge, Conductor
from bot.config import Settings
from bot.decisions import DecisionStore
from bot.inbox import Inbox
from bot.journal import RedisToolJournal
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
    poll: float = 1.0

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then drain in-flight runs and return."""
        consumer = asyncio.create_task(self.worker.run())
        reminders = asyncio.create_task(self.scheduler.run(stop))
        gauges = asyncio.create_task(self._sample_gauges(stop))
        redelivery = asyncio.create_task(self._redeliver(stop))
        tasks = (consumer, reminders, gauges, redelivery)
        try:
            await stop.wait()
        finally:
            self.worker.stop()
            await self.worker.drain(self.drain_timeout)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _redeliver(self, stop: asyncio.Event) -> None:
        """Deliver parked replies once their platform answers again."""
        while not stop.is_set():
            try:
                await self.outbox.redeliver(self.conductor.adapters, self.conductor.delivered)
            except (ConnectionError, OSError, aioredis.ConnectionError):
                log.debug("could not look for undelivered replies")
            except Exception:  # one bad parked message must not stop redelivery for good
                log.exception("redelivery pass failed")
            await sleep_unless(stop, self.poll)

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
    after_run: Callable[[Outcome], Awaitable[None]] | None = None,
    poll: float = 1.0,
) -> Runtime:
    runtime_settings = settings.runtime
    keys = Keys(settings.redis.key_prefix)
    outbox = Outbox(
        redis,
        keys,
        ttl=runtime_settings.dedup_ttl,
        attempts=runtime_settings.delivery_attempts,
        give_up_after=runtime_settings.redeliver_for,
    )
    scheduler = ReminderScheduler(redis, keys, outbox, adapters, poll=poll)
    sessions = SessionStore(redis, keys, ttl=runtime_settings.session_ttl)
    decisions = DecisionStore(redis, keys, ttl=runtime_settings.decision_ttl)
    locks = ConversationLocks(
        redis, keys, lease=runtime_settings.lock_lease, fence_ttl=runtime_settings.session_ttl
    )
    agent = make_agent(scheduler)
    if agent.journal is None:  # approved side effects run at most once across processes
        agent.journal = RedisToolJournal(redis, keys, ttl=runtime_settings.session_ttl)
    conductor = Conductor(
        agent=agent,
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
        gatherer=Gatherer(
            max_bytes=int(settings.attachments.max_file_mb * 1024 * 1024),
            max_files=settings.attachments.max_files,
            file_tokens=settings.attachments.file_tokens,
            thread_tokens=settings.attachments.thread_tokens,
        ),
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
        poll=poll,
    )
