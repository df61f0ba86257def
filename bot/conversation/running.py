"""Running the agent for one inbox entry: progress in the chat, the answer as it is written,
metrics and usage, and the outbox keys every reply of the entry goes out under.

A quick answer needs no "typing…": progress shows only once a run has worked for
`PROGRESS_DELAY` (an adapter may set its own `progress_delay`), and a status that fades by
itself is shown again while the run works (the adapter's `progress_refresh`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from adapters.base import (
    ConversationKey,
    Inbound,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    SessionState,
)
from adapters.platform import ChatAdapter
from agent.deferred import Plan
from agent.messages import Usage
from agent.outcomes import Failed, Finished, Outcome
from agent.protocols import ProgressEvent, RunContext
from bot.conversation.attachments import Gathered, Gatherer
from bot.ops import metrics
from bot.ops.health import redis_away
from bot.runtime.holding import PendingWrites
from bot.runtime.keys import reply_key
from bot.runtime.outbox import Outbox
from bot.runtime.streaming import AnswerStream, StreamPlan, live_message

log = logging.getLogger(__name__)

PROGRESS_DELAY = 0.5  # seconds a run works before the chat shows that it is working
APPROVED_PLAN = "Approved plan"  # a plan's title in the stream when the model named no goal

# Admission check before a run: returns a refusal text, or None to go ahead.
Admission = Callable[[InboundMessage], Awaitable[str | None]]
# Called with the event and the tokens an agent call used.
Charge = Callable[[Inbound, Usage], Awaitable[None]]
# Runs after a finished or failed run; what it returns is posted after the answer.
AfterRun = Callable[[Outcome], Awaitable[OutboundMessage | None]]


Invoke = Callable[[Callable[[ProgressEvent], Awaitable[None]]], Awaitable[Outcome]]


def run_context(event: Inbound, *, org_team: bool = False) -> RunContext:
    """`org_team`: memories shared with the team are the person's organisation's (Slack
    Enterprise Grid), where the event names one; else their workspace's."""
    key = event.conversation
    return RunContext(
        conversation_id=key.id,
        platform=key.platform,
        user_id=event.actor.user_id,
        chat_id=key.chat_id,
        # the person's own team, never the conversation's: a Slack Connect guest does not
        # see the host team's memories (and one whose team Slack does not name, none)
        team_id=event.actor.team_id
        if key.platform == "slack"
        else key.team_id or event.actor.team_id,
        org_id=event.actor.enterprise_id,  # only a platform with organisations sets it
        org_team=org_team,
        is_direct=event.is_direct,
        user_name=event.actor.name,
        groups=event.actor.groups,
        asked=not (isinstance(event, InboundMessage) and event.kind == "triggered"),
        unattended=isinstance(event, InboundMessage) and event.kind in ("scheduled", "triggered"),
    )


async def context_for(
    adapter: ChatAdapter, event: InboundMessage, standing: tuple[str, ...] = ()
) -> RunContext:
    """The run's context, with the person's time zone and name when the platform tells them
    (Slack events carry neither; a memory keeps who said it by name), the standing
    permissions of Parley's own objective (a schedule's), and what a team is on its platform."""
    context = replace(run_context(event, org_team=adapter.org_team), standing=standing)
    if event.kind != "triggered":
        context = replace(context, timezone=await adapter.user_timezone(event.actor.user_id))
        if not context.user_name:
            context = replace(context, user_name=await adapter.user_name(event.actor.user_id))
    return context


@dataclass(kw_only=True)
class Reply:
    """Sends for one inbox entry, each under an outbox key named for what it is (`slot`), so
    a replay that takes another path through the entry still meets its own keys."""

    outbox: Outbox
    adapter: ChatAdapter
    entry_id: str
    conversation: ConversationKey
    # Mentions that may ping in these replies: the ones the person typed, and that person.
    allowed_mentions: frozenset[str] = frozenset()
    later: PendingWrites | None = None  # what was sent is recorded with the next session save
    first_try: bool = False  # no earlier attempt at the entry can have left anything
    reply_url: str | None = None  # the event's, for private answers to its author
    reply_as: str | None = None  # that author: `reply_url` reaches them and nobody else
    press_url: str | None = None  # a press's (Slack response_url): only edits, never sends
    reply_to: str | None = None  # in a group: the message that asked
    # Said in a group instead of a private message that cannot reach its person there.
    unreachable: str | None = None

    async def send(
        self, message: OutboundMessage, slot: str, *, per_conversation: bool = False
    ) -> MessageRef | None:
        key = reply_key(self.conversation.id, slot) if per_conversation else self.key_for(slot)
        return await self.outbox.send(
            self.adapter, key, self.conversation, self.allow(message), self.later
        )

    def key_for(self, slot: str) -> str:
        """The outbox key a send in `slot` uses (a stream delivers under it too)."""
        return reply_key(self.entry_id, slot)

    async def edit(self, ref: MessageRef, message: OutboundMessage, slot: str) -> None:
        message = self.allow(message)
        if self.press_url and message.private_to and message.private_to == self.reply_as:
            message = replace(message, reply_url=self.press_url)
        await self.outbox.edit(self.adapter, self.key_for(slot), ref, message)

    def allow(self, message: OutboundMessage) -> OutboundMessage:
        allowed = message.allowed_mentions | self.allowed_mentions
        # only what is private to the event's author goes through its reply_url
        mine = message.private_to is not None and message.private_to == self.reply_as
        url = message.reply_url or (self.reply_url if mine else None)
        reply_to = message.reply_to or self.reply_to
        unreachable = message.unreachable or (self.unreachable if message.private_to else None)
        return replace(
            message,
            allowed_mentions=allowed,
            reply_url=url,
            reply_to=reply_to,
            unreachable=unreachable,
        )


@dataclass(kw_only=True)
class Called:
    """What came of one agent call."""

    outcome: Outcome
    stream: AnswerStream | None
    note: OutboundMessage | None = None


@dataclass(frozen=True, kw_only=True)
class StatusLines:
    """What a run's status line says while it works (the engine's sentences, as data)."""

    thinking: str
    using: str  # `{tool}`: the tool's name


@dataclass(kw_only=True)
class Runner:
    outbox: Outbox
    lines: StatusLines
    stream_interval: float | None = None  # seconds between live updates; None: no streaming
    stream_first_show: float = 0.0  # seconds an answer is written before it is first shown
    charge: Charge | None = None
    after_run: AfterRun | None = None
    gatherer: Gatherer | None = None
    _progress_shown: set[str] = field(default_factory=set)

    async def call(
        self,
        event: Inbound,
        reply: Reply,
        invoke: Invoke,
        *,
        private: bool = False,
        title: str | None = None,
        plan: Plan | None = None,
    ) -> Called:
        """Run `invoke`; `private`: the answer is for the requester alone, so neither it nor
        the model's words as a status are shown in the conversation while it is written.
        Where the platform has agent sessions, the run's session follows it (`title`: a new
        session's, from the request). `plan`: an approved plan the run carries out, shown
        with its steps' progress where the platform shows plans."""
        conversation = event.conversation
        # a new run's session begins at the message that asked; a resumed one goes on in its own
        began = (
            event.message_id if isinstance(event, InboundMessage) and title is not None else None
        )
        await _session(reply.adapter, event, began, "working", title)
        latest: list[str] = []
        said: list[int] = []  # the step whose status is the model's own words
        delay = reply.adapter.progress_delay
        if delay is None:
            delay = PROGRESS_DELAY
        showing = delay <= 0

        async def show(text: str) -> None:
            nonlocal showing
            showing = True
            self._progress_shown.add(conversation.id)
            try:
                await reply.adapter.progress(conversation, text)
            except Exception:
                log.debug("progress update failed in %s", conversation.id)

        stream = None if private else self._answer_stream(event, reply, plan)

        async def progress(update: ProgressEvent) -> None:
            if update.kind in ("text_delta", "text_reset"):
                if stream is not None:
                    await stream.on_progress(update)
                if (status := update.detail.get("status")) and not private:
                    latest[:], said[:] = [status], [update.step]
                    if showing:
                        await show(status)
                return
            if update.kind == "tool_progress":  # the tool's own status line
                if private:  # its words may carry what it reads; the slow-run timer shows latest
                    return
                latest[:] = [update.detail.get("status", "")]
                if showing:
                    await show(latest[0])
                return
            if stream is not None and update.kind in ("tool_started", "tool_finished"):
                await stream.on_progress(update)  # a task in the answer, where shown
            text = self.lines.thinking if update.kind == "step_started" else None
            if update.kind == "tool_started" and update.tool and said != [update.step]:
                text = self.lines.using.format(
                    tool=update.tool
                )  # unless the model said what it does
            if text is not None:
                latest[:] = [text]
                if showing:
                    await show(text)

        async def show_when_slow() -> None:
            await asyncio.sleep(delay)
            if latest:
                await show(latest[0])
            refresh = reply.adapter.progress_refresh
            while refresh and latest:
                await asyncio.sleep(refresh)
                await show(latest[0])

        started = time.monotonic()
        timer = asyncio.create_task(show_when_slow())
        try:
            outcome = await invoke(progress)
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
            if stream is not None:
                await stream.settle()
        await _session(reply.adapter, event, began, _session_state(outcome))
        _count(outcome, time.monotonic() - started)
        if self.charge is not None:
            try:
                await self.charge(event, outcome.trace.usage)
            except Exception:  # the answer matters more than the bookkeeping
                log.exception("could not charge a run's usage")
        note = None
        # a private run's reads are the requester's alone: nothing of them goes into memory
        done = isinstance(outcome, Finished | Failed) and not outcome.state.private_to
        if self.after_run is not None and done:
            try:
                note = await self.after_run(outcome)
            except Exception:
                log.exception("after-run hook failed")
        return Called(outcome=outcome, stream=stream, note=note)

    async def gather(self, event: InboundMessage, reply: Reply, *, following: bool) -> Gathered:
        """Thread context and files for a run; a file that can't be used is said so."""
        if self.gatherer is None:
            return Gathered(objective=event.text)
        gathered = await self.gatherer.gather(event, reply.adapter, following=following)
        if gathered.notes:
            await reply.send(OutboundMessage(text=" ".join(gathered.notes)), "files")
        return gathered

    async def saw(self, event: InboundMessage) -> None:
        """A message read without gathering (an answer to a question): noted as seen, so a
        later mention does not read it again as missed."""
        if self.gatherer is not None:
            await self.gatherer.saw(event)

    async def answer(self, called: Called | None, reply: Reply, message: OutboundMessage) -> None:
        """Deliver the final answer: finish its stream, or send it, under the outcome key."""
        answer = reply.allow(message)
        stream = called.stream if called is not None else None
        if stream is None:
            await reply.send(answer, "outcome")
            return
        try:
            await stream.finish(answer)  # under the key the send would use
        except Exception as exc:
            if redis_away(exc):
                raise  # the entry is handled again once Redis is back
            # The platform did not take it: parked for redelivery, or given up if refused
            # for good, exactly as the outbox does with any reply.
            key = reply.key_for("outcome")
            await self.outbox.undelivered(key, reply.conversation, answer, exc)

    async def discard(self, called: Called | None) -> None:
        """The run ended in a question or a plan: take back what was shown of its text."""
        if called is not None and called.stream is not None:
            await called.stream.discard()

    async def clear_progress(self, adapter: ChatAdapter, conversation: ConversationKey) -> None:
        if conversation.id not in self._progress_shown:
            return
        self._progress_shown.discard(conversation.id)
        try:
            await adapter.progress(conversation, None)
        except Exception:
            log.warning("could not clear progress in %s", conversation.id)

    def _answer_stream(
        self, event: Inbound, reply: Reply, plan: Plan | None = None
    ) -> AnswerStream | None:
        if self.stream_interval is None:
            return None
        live = live_message(
            reply.adapter,
            event.conversation,
            user_id=event.actor.user_id,
            team_id=event.actor.team_id or event.conversation.team_id,
            is_direct=event.is_direct,
            allowed_mentions=reply.allowed_mentions,
            reply_to=reply.reply_to,
        )
        if live is None:
            return None
        return AnswerStream(
            live=live,
            adapter=reply.adapter,
            conversation=event.conversation,
            redis=self.outbox.redis,
            redis_key=self.outbox.keys.outbox(reply.key_for("outcome")),
            ttl_ms=self.outbox.ttl_ms,
            interval=self.stream_interval,
            first_show=self.stream_first_show,
            mode="live" if reply.first_try else "unknown",
            later=reply.later,
            plan=_shown_plan(plan),
        )


async def _session(
    adapter: ChatAdapter,
    event: Inbound,
    message_id: str | None,
    state: SessionState,
    title: str | None = None,
) -> None:
    """Tell a platform with agent sessions (Slack) how the run stands; only a nicety.
    `message_id`: the message a new run began with (None: the session goes on)."""
    try:
        initiator = event.actor.user_id
        await adapter.session_status(event.conversation, message_id, state, title, initiator)
    except Exception:
        log.debug("no session status in %s", event.conversation.id)


async def session_ended(adapter: ChatAdapter, event: Inbound, state: SessionState) -> None:
    """Nothing runs any more: "ended" when a suspended run ends without running again
    (cancelled, or its question expired), "stopped" for a stop when nothing ran."""
    await _session(adapter, event, None, state)


def _shown_plan(plan: Plan | None) -> StreamPlan | None:
    if plan is None or not plan.steps:
        return None
    steps = tuple((step.tool, step.description) for step in plan.steps)
    return StreamPlan(title=plan.goal or APPROVED_PLAN, steps=steps)


def _session_state(outcome: Outcome) -> SessionState:
    if isinstance(outcome, Finished):
        return "done"
    if isinstance(outcome, Failed):
        return "stopped" if outcome.reason == "stopped" else "done"
    return "waiting"


def _count(outcome: Outcome, seconds: float) -> None:
    metrics.RUN_SECONDS.observe(seconds)
    metrics.RUNS.labels(type(outcome).__name__.lower()).inc()
    metrics.RUN_STEPS.observe(outcome.trace.iterations)
    for step in outcome.trace.steps:
        for call in step.tool_calls:
            metrics.TOOL_CALLS.labels(call.label, call.status).inc()
    for call in outcome.trace.resumed_calls:
        metrics.TOOL_CALLS.labels(call.label, call.status).inc()
