"""The worker side assembled: inbox, conversation executor, workers and the reminder and
schedule loops on one Redis.

Each long-running loop beats a heartbeat in `health`, which `/readyz` and `/healthz` read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import redis.asyncio as aioredis

from adapters import traits
from adapters.base import ConversationKey, OutboundMessage, is_stop
from adapters.platform import ChatAdapter
from agent.loop import Agent
from agent.mcp.following import TaskFollower, TaskPolling
from agent.outcomes import Outcome
from agent.protocols import MemoryStore, RunContext, Scheduler
from bot.config import Settings
from bot.conversation import texts
from bot.conversation.attachments import Gatherer, ThreadMarks
from bot.conversation.commands import Commands, UsageText
from bot.conversation.engine import LOST_TEXT, STATUS_LINES
from bot.conversation.executor import Executor
from bot.conversation.images import ImageDecoder
from bot.conversation.pdf_process import PdfReader
from bot.conversation.running import Admission, Charge, Runner
from bot.conversation.shown import ShownLists
from bot.conversation.standing_grants import StandingGrants
from bot.conversation.stopping import TaskStops
from bot.conversation.voice import LONGEST as LONGEST_TRANSCRIPT
from bot.conversation.voice import Transcriber, Voice
from bot.features.connections.commands import ConnectionCommands
from bot.features.followed_tasks import TaskFollowing, TaskWords
from bot.features.reminders import ReminderScheduler
from bot.features.reoffers import PromptOffers
from bot.features.schedules.clock import ScheduleClock
from bot.features.schedules.commands import ScheduleCommands
from bot.features.schedules.runs import Objectives
from bot.features.schedules.store import BookOf, Schedule, ScheduleStore
from bot.features.standing import StandingStore
from bot.ops import metrics
from bot.ops.health import Health
from bot.ops.shutdown import STILL_RUNNING, describe
from bot.runtime.decisions import DecisionStore
from bot.runtime.inbox import Inbox
from bot.runtime.journal import RedisToolJournal
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks
from bot.runtime.outbox import Outbox
from bot.runtime.pairing import Pairings
from bot.runtime.sessions import SessionStore
from bot.runtime.stops import Stops
from bot.runtime.worker import Worker
from bot.wiring.mcp_setup import build_connections
from bot.wiring.platforms import owner_allowed
from loops import Heartbeat, Running, repeat

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
    schedules: ScheduleStore
    clock: ScheduleClock
    executor: Executor
    worker: Worker
    stops: Stops
    drain_timeout: float
    health: Health
    stop_grace: float = 10.0  # after the drain: cancelled work's and closing's share
    poll: float = 1.0
    tasks: TaskFollowing | None = None  # MCP tasks followed past their call
    offers: PromptOffers | None = None  # Telegram prompts to offer again (reoffers.py)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then drain in-flight runs and return."""
        gauges_beat = self.health.register("gauges", every=GAUGE_EVERY + 30.0)
        redelivery_beat = self.health.register("redelivery", every=self.poll + 30.0)
        stops_beat = self.health.register("stops", every=30.0)
        loops = [
            (stops_beat, self.stops.listen(stop, stops_beat)),
            (self.worker.reading, self.worker.run()),
            (self.scheduler.heartbeat, self.scheduler.run(stop)),
            (self.clock.heartbeat, self.clock.run(stop)),
            (gauges_beat, self._sample_gauges(stop, gauges_beat)),
            (redelivery_beat, self._redeliver(stop, redelivery_beat)),
        ]
        for due in (self.tasks, self.offers):
            if due is not None:
                loops.append((due.watched(self.health), due.run(stop)))
        # a quarter of the stop grace each: cancelled runs, loops (Running's two halves), closing
        try:
            async with Running(stop, grace=self.stop_grace / 8) as running:
                for heartbeat, loop in loops:
                    running.start(loop, heartbeat)
                try:
                    await stop.wait()
                finally:
                    self.worker.stop()
                    await self.worker.drain(self.drain_timeout, self.stop_grace / 4)
            if running.left:
                log.error(STILL_RUNNING, describe(running.left))
        finally:
            await self.worker.leave()

    async def _redeliver(self, stop: asyncio.Event, heartbeat: Heartbeat) -> None:
        """Deliver parked replies once their platform answers again."""
        redeliver = partial(self.outbox.redeliver, self.executor.adapters, self.executor.delivered)
        await repeat(stop, heartbeat, redeliver, self.poll)

    async def _sample_gauges(self, stop: asyncio.Event, heartbeat: Heartbeat) -> None:
        async def one_pass() -> None:
            for kind in ("question", "approval"):
                count = await self.decisions.count_pending(kind)
                metrics.PENDING_DECISIONS.labels(kind).set(count)

        await repeat(stop, heartbeat, one_pass, GAUGE_EVERY)


GAUGE_EVERY = 5.0  # seconds between two samples of the gauges
TASK_WORDS = TaskWords(
    later=texts.TASK_LATER,
    finished=texts.TASK_FINISHED,
    failed=texts.TASK_FAILED,
    cancelled=texts.TASK_CANCELLED,
    gone=texts.TASK_GONE,
    stopped=texts.TASK_STOPPED,
    private=texts.TASK_PRIVATE,
)


@dataclass(frozen=True)
class Scheduling(BookOf):
    """What the agent's tools schedule with: one-shot reminders and recurring schedules."""

    reminders: ReminderScheduler
    book: ScheduleStore

    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        return await self.reminders.schedule_reminder(text, due_at, context)


def owner_left(adapters: dict[str, ChatAdapter]) -> Callable[[Schedule], Awaitable[bool]]:
    """Whether the owner's platform says they left (its adapter's `user_left`)."""

    async def left(found: Schedule) -> bool:
        adapter = adapters.get(found.platform)
        return adapter is not None and await adapter.user_left(found.owner_id)

    return left


def owner_member(
    adapters: dict[str, ChatAdapter],
) -> Callable[[Schedule], Awaitable[bool | None]]:
    """Whether the owner and Parley are still in the schedule's chat, asked of its platform."""

    async def member(found: Schedule) -> bool | None:
        adapter = adapters.get(found.platform)
        if adapter is None:
            return None
        where = ConversationKey.parse(found.conversation_id)
        try:
            return await adapter.member_of(where, found.owner_id)
        except Exception:  # the platform could not say: the slot waits for the next one
            log.warning("could not check the members of %s", where.id, exc_info=True)
            return None

    return member


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
    health: Health | None = None,
    mcp_tasks: TaskPolling | None = None,
    offers: PromptOffers | None = None,
) -> Runtime:
    runtime_settings = settings.runtime
    health = health or Health()
    keys = Keys(settings.redis.key_prefix)
    outbox = Outbox(
        redis,
        keys,
        ttl=runtime_settings.dedup_ttl,
        lost_text=LOST_TEXT,
        attempts=runtime_settings.delivery_attempts,
        give_up_after=runtime_settings.redeliver_for,
    )
    scheduler = ReminderScheduler(
        redis, keys, outbox, adapters, said=texts.REMINDER, poll=poll, health=health
    )
    sessions = SessionStore(redis, keys, ttl=runtime_settings.session_ttl)
    decisions = DecisionStore(redis, keys, ttl=runtime_settings.decision_ttl)
    locks = ConversationLocks(
        redis,
        keys,
        lease=runtime_settings.lock_lease,
        ttl=runtime_settings.session_ttl,
    )
    stops = Stops(redis, keys)
    schedules = ScheduleStore(
        redis,
        keys,
        min_interval=settings.schedules.min_interval,
        approvers=frozenset(settings.access.approvers),
        per_owner=settings.schedules.per_owner,
        orphan_ttl=settings.schedules.orphan_days * 86_400,
    )
    clock = ScheduleClock(
        redis, keys, schedules, dedup_ttl=runtime_settings.dedup_ttl, poll=poll, health=health
    )
    agent = make_agent(Scheduling(scheduler, schedules))
    tasks = None
    if mcp_tasks is not None:  # a long MCP task is followed to its end, not cancelled
        tasks = TaskFollowing(
            redis, keys, outbox, adapters, mcp_tasks, TASK_WORDS, poll=poll, health=health
        )
        agent.tools.provide(TaskFollower, tasks)  # type: ignore[type-abstract]
    if agent.journal is None:  # approved side effects run at most once across processes
        agent.journal = RedisToolJournal(redis, keys, ttl=runtime_settings.session_ttl)
    standing = StandingStore(
        redis, keys, ttl=settings.mcp.standing_ttl, scope=settings.mcp.standing_scope
    )
    if agent.standing is None:
        agent.standing = standing
    inbox = Inbox(redis, keys, dedup_ttl=runtime_settings.dedup_ttl)
    executor = Executor(
        agent=agent,
        adapters=adapters,
        sessions=sessions,
        decisions=decisions,
        outbox=outbox,
        commands=Commands(
            memory,
            usage,
            ShownLists(redis, keys, ttl=runtime_settings.session_ttl),
            pairings=Pairings(redis, keys),
            approvers=frozenset(settings.access.approvers),
        ),
        runner=Runner(
            outbox=outbox,
            lines=STATUS_LINES,
            stream_interval=settings.streaming.interval if settings.streaming.enabled else None,
            stream_first_show=settings.streaming.first_show,
            charge=charge,
            after_run=after_run,
            gatherer=Gatherer(
                max_bytes=int(settings.attachments.max_file_mb * 1024 * 1024),
                max_files=settings.attachments.max_files,
                file_tokens=settings.attachments.file_tokens,
                thread_tokens=settings.attachments.thread_tokens,
                pdf=PdfReader(
                    seconds=settings.attachments.pdf_timeout,
                    memory_mb=settings.attachments.reader_memory_mb,
                    at_once=settings.attachments.readers,
                ),
                images=ImageDecoder(at_once=settings.attachments.readers),
                marks=ThreadMarks(redis, keys, ttl=runtime_settings.session_ttl),
            ),
        ),
        approvers=frozenset(settings.access.approvers),
        max_message_chars=settings.agent.max_message_chars,
        admission=admission,
        stops=stops,
        features=[
            voice_of(settings),
            ScheduleCommands(store=schedules),
            Objectives(
                store=schedules,
                owner_allowed=owner_allowed(settings, Pairings(redis, keys)),
                owner_left=owner_left(adapters),
                owner_member=owner_member(adapters),
            ),
            ConnectionCommands(build_connections(settings, redis), standing),
            StandingGrants(standing),
            *([TaskStops(tasks, frozenset(settings.access.approvers))] if tasks else []),
        ],
        standing_everywhere=standing.scope == "everywhere",
        forward=inbox.submit,
    )
    worker = Worker(
        redis,
        keys,
        locks,
        executor.handle,
        on_error=executor.fail_quietly,
        concurrency=runtime_settings.concurrency,
        reclaim_idle=runtime_settings.reclaim_idle,
        attempts_ttl=runtime_settings.session_ttl,
        max_attempts=runtime_settings.max_attempts,
        health=health,
        stops=stops,
        is_stop=is_stop,
    )
    return Runtime(
        keys=keys,
        inbox=inbox,
        decisions=decisions,
        sessions=sessions,
        outbox=outbox,
        scheduler=scheduler,
        schedules=schedules,
        clock=clock,
        executor=executor,
        worker=worker,
        stops=stops,
        drain_timeout=runtime_settings.drain_timeout,
        stop_grace=runtime_settings.stop_grace,
        poll=poll,
        health=health,
        tasks=tasks,
        offers=offers,
    )


def voice_of(settings: Settings) -> Voice:
    """Voice notes through the configured transcription API, or a polite refusal without one."""
    voice = settings.voice
    key = voice.transcribe_api_key
    transcriber = (
        Transcriber(
            url=voice.transcribe_url,
            model=voice.transcribe_model,
            api_key=key.get_secret_value() if key else None,
            timeout=voice.transcribe_timeout,
        )
        if voice.transcribe_url
        else None
    )
    return Voice(
        transcriber=transcriber,
        max_bytes=int(voice.max_mb * 1024 * 1024),
        max_seconds=voice.max_seconds,
        max_chars=message_limits(settings),
        longest=settings.agent.max_message_chars or LONGEST_TRANSCRIPT,
    )


def message_limits(settings: Settings) -> dict[str, int]:
    """The longest message text per platform: PARLEY_MAX_MESSAGE_CHARS, else the platform's
    (each adapter's traits loaded only where that platform is configured, as platforms.py)."""
    chosen = settings.agent.max_message_chars
    return {name: chosen or traits.of(name).max_text for name in settings.chat_platforms()}
