"""What one inbound event means for its conversation, decided under the conversation's lock.

A message starts a run, answers a pending question, or — while an approval waits — rejects
the plan with the message as the reason. A button press decides a pending question or
approval if the presser may. Every reply goes through the outbox with a key derived from the
inbox entry and what the reply is for, so processing the same entry twice never posts twice.

Whatever happens while replying, the session is stored: a reply the platform did not take
is the outbox's to deliver later, and an unexpected error leaves the conversation idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from adapters.base import (
    ChatAdapter,
    ConversationKey,
    Inbound,
    InboundAction,
    InboundMessage,
    MessageRef,
    OutboundMessage,
)
from agent.loop import Agent
from agent.messages import Usage
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Failed, Finished, Outcome
from agent.protocols import ProgressEvent, RunContext
from bot.conversation.attachments import Gathered, Gatherer
from bot.conversation.commands import MEMORY_ACTION, Commands
from bot.conversation.render import (
    APPROVE,
    REJECT,
    decided_message,
    mention,
    outcome_message,
    stale_click_text,
    typed_mentions,
)
from bot.ops import metrics
from bot.ops.health import redis_away
from bot.ops.logs import log_context
from bot.runtime.decisions import Decision, DecisionStore, decision_id_for
from bot.runtime.decisions import Status as DecisionStatus
from bot.runtime.locks import Lease
from bot.runtime.outbox import Outbox
from bot.runtime.sessions import Resolution, Session, SessionStore
from bot.runtime.streaming import AnswerStream, live_message

log = logging.getLogger(__name__)
TOO_LONG = (
    "That message is too long for me ({length:,} characters; my limit is {limit:,}). "
    "Could you shorten it or split it up?"
)


def too_long(length: int, limit: int) -> str:
    """The polite answer to a message over the length limit."""
    return TOO_LONG.format(length=length, limit=limit)


FEEDBACK_NOTE = "Understood — I won't go ahead with that plan. I'll take your message into account."
NOT_YOURS_TO_CANCEL = "Only {who} or an approver can cancel what I'm waiting on here."
WAIT_FOR_REQUESTER = "I'm waiting for {who} to answer first; ask me again once that's settled."
ERROR_TEXT = "Sorry — something went wrong on my side. Please try again."
UNCERTAIN_TEXT = (
    "I was interrupted while doing this, so I can't tell whether it happened:\n{steps}\n"
    "I won't try again unless you approve it once more."
)
INTERRUPTED = "Interrupted: the run failed before this call's result was known."
PROGRESS_DELAY = 0.5  # seconds a run works before the chat shows that it is working

# Admission check before a run: returns a refusal text, or None to go ahead.
Admission = Callable[[InboundMessage], Awaitable[str | None]]
# Called with the event and the tokens an agent call used.
Charge = Callable[[InboundMessage | InboundAction, Usage], Awaitable[None]]


def run_context(event: Inbound) -> RunContext:
    key = event.conversation
    return RunContext(
        conversation_id=key.id,
        platform=key.platform,
        user_id=event.actor.user_id,
        chat_id=key.chat_id,
        team_id=key.team_id or event.actor.team_id,
        is_direct=event.is_direct,
        user_name=event.actor.name,
    )


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

    async def send(self, message: OutboundMessage, slot: str) -> MessageRef | None:
        return await self.outbox.send(
            self.adapter, self.key_for(slot), self.conversation, self.allow(message)
        )

    def key_for(self, slot: str) -> str:
        """The outbox key a send in `slot` uses (a stream delivers under it too)."""
        return f"{self.entry_id}:{slot}"

    async def edit(self, ref: MessageRef, message: OutboundMessage, slot: str) -> None:
        await self.outbox.edit(self.adapter, self.key_for(slot), ref, self.allow(message))

    def allow(self, message: OutboundMessage) -> OutboundMessage:
        allowed = message.allowed_mentions | self.allowed_mentions
        return replace(message, allowed_mentions=allowed)


@dataclass(kw_only=True)
class Turn:
    """One inbox entry being handled."""

    event: Inbound
    session: Session
    reply: Reply
    lease: Lease
    stream: AnswerStream | None = None  # the answer being shown while it is written
    note: OutboundMessage | None = None  # from the after-run hook, shown after the answer


@dataclass(kw_only=True)
class Conductor:
    agent: Agent
    adapters: dict[str, ChatAdapter]
    sessions: SessionStore
    decisions: DecisionStore
    outbox: Outbox
    commands: Commands
    approvers: frozenset[str] = frozenset()
    max_message_chars: int = 4000
    admission: Admission | None = None
    charge: Charge | None = None
    # Runs after a finished or failed run; what it returns is posted after the answer.
    after_run: Callable[[Outcome], Awaitable[OutboundMessage | None]] | None = None
    gatherer: Gatherer | None = None
    stream_interval: float | None = None  # seconds between live updates; None: no streaming
    _progress_shown: set[str] = field(default_factory=set)

    async def handle(self, entry_id: str, event: Inbound, lease: Lease) -> None:
        session = await self.sessions.load(lease.conversation_id)
        if session.done_with(entry_id):
            return
        adapter = self.adapters.get(event.conversation.platform)
        if adapter is None:
            log.error("no adapter for %s; dropping %s", event.conversation.platform, entry_id)
            return
        reply = Reply(
            outbox=self.outbox,
            adapter=adapter,
            entry_id=entry_id,
            conversation=event.conversation,
            allowed_mentions=typed_mentions(event),
        )
        turn = Turn(event=event, session=session, reply=reply, lease=lease)
        run_id = (
            session.state.run_id if session.state is not None and session.status != "idle" else ""
        )
        log_context.set({"conversation": event.conversation.id, "entry": entry_id, "run": run_id})
        try:
            if session.resolving is not None and session.resolving.entry_id == entry_id:
                await self._resume(turn, session.resolving)  # a replay after a crash
            elif isinstance(event, InboundAction):
                await self._on_action(turn, event)
            else:
                await self._on_message(turn, event)
        except Exception:
            # Don't leave the conversation "working" on a run whose outcome is lost; the
            # entry stays unhandled, so the worker may try it again (then dead-letters it).
            if session.status == "running":
                if session.state is not None:
                    session.state.abandon(INTERRUPTED)
                self._settle(session)
            await self._finish(turn, None)
            raise
        await self._finish(turn, entry_id)

    async def _finish(self, turn: Turn, entry_id: str | None) -> None:
        """Clear the progress display and store the session (with the entry, once handled)."""
        conversation = turn.event.conversation
        if conversation.id in self._progress_shown:
            self._progress_shown.discard(conversation.id)
            try:
                await turn.reply.adapter.progress(conversation, None)
            except Exception:
                log.warning("could not clear progress in %s", conversation.id)
        if entry_id is not None:
            turn.session.last_entry = entry_id
        await self.sessions.save(turn.lease, turn.session)

    # --- messages ---------------------------------------------------------------------------

    async def _on_message(self, turn: Turn, event: InboundMessage) -> None:
        if event.kind != "text":
            return  # what an adapter only saw (a refusal, a sticker): the engine's to answer
        session, reply = turn.session, turn.reply
        context = run_context(event)
        if event.command:
            result = await self.commands.handle(event, context, session)
            private_to = event.actor.user_id if result.private else None
            answer = OutboundMessage(
                text=result.text,
                private_to=private_to,
                buttons=result.buttons,
                decision_id=MEMORY_ACTION if result.buttons else None,
            )
            if result.cancel and (not_yours := await self._cancel(event, session, reply)):
                answer = not_yours
            await reply.send(answer, "reply")
            return
        if not event.mentioned and session.state is None:
            return  # a thread message in a conversation Parley is not part of
        if len(event.text) > self.max_message_chars:
            text = too_long(len(event.text), self.max_message_chars)
            await reply.send(OutboundMessage(text=text), "reply")
            return
        if self.admission is not None and (refusal := await self.admission(event)):
            await reply.send(OutboundMessage(text=refusal), "reply")
            return

        decision = await self._pending(session)
        if decision is None or session.state is None:
            history = session.state
            gathered = await self._gather(turn, event, following=history is not None)
            if not gathered.usable:
                return
            outcome = await self._call(
                turn,
                lambda p: self.agent.run(
                    gathered.objective,
                    context,
                    history=history,
                    on_progress=p,
                    attachments=gathered.blocks,
                ),
            )
            await self._deliver(outcome, turn)
            return
        if not self._may_decide(event, decision):
            who = mention(
                event.conversation.platform, decision.requester_id, decision.requester_name
            )
            text = WAIT_FOR_REQUESTER.format(who=who)
            await reply.send(OutboundMessage(text=text, allowed_mentions=frozenset({who})), "reply")
            return
        by = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
        if decision.kind == "question":
            decided = await self.decisions.decide(decision.id, "answered", by)
            await self._show_decided(decided, reply)
            resolution = Resolution(entry_id=reply.entry_id, answer=event.text)
        else:
            decided = await self.decisions.decide(decision.id, "rejected", by)
            await self._show_decided(decided, reply)
            await reply.send(OutboundMessage(text=FEEDBACK_NOTE), "feedback")
            resolution = Resolution(entry_id=reply.entry_id, approved=False, reason=event.text)
        await self._resume(turn, resolution)

    async def _gather(self, turn: Turn, event: InboundMessage, *, following: bool) -> Gathered:
        """Thread context and files for a new run; a file that can't be used is said so."""
        if self.gatherer is None:
            return Gathered(objective=event.text)
        gathered = await self.gatherer.gather(event, turn.reply.adapter, following=following)
        if gathered.notes:
            await turn.reply.send(OutboundMessage(text=" ".join(gathered.notes)), "files")
        return gathered

    async def _cancel(
        self, event: InboundMessage, session: Session, reply: Reply
    ) -> OutboundMessage | None:
        """Cancel the run or its pending decision; a refusal if this person may not."""
        decision = await self._pending(session)
        if decision is not None and not self._may_decide(event, decision):
            who = mention(
                event.conversation.platform, decision.requester_id, decision.requester_name
            )
            text = NOT_YOURS_TO_CANCEL.format(who=who)
            return OutboundMessage(text=text, allowed_mentions=frozenset({who}))
        if decision is not None:
            by = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
            await self._show_decided(
                await self.decisions.decide(decision.id, "cancelled", by), reply
            )
        if session.state is not None:
            session.state.abandon("Not run: the user cancelled.")
        self._settle(session)
        return None

    # --- button presses ---------------------------------------------------------------------

    async def _on_action(self, turn: Turn, event: InboundAction) -> None:
        session, reply = turn.session, turn.reply
        notify = self._notify
        if event.decision_id == MEMORY_ACTION:  # a Forget button: no run involved
            text = await self.commands.forget_pressed(event, run_context(event))
            await notify(event, text)
            await reply.send(OutboundMessage(text=text, private_to=event.actor.user_id), "reply")
            return
        decision = await self.decisions.get(event.decision_id)
        if decision is None or decision.conversation_id != event.conversation.id:
            await notify(event, stale_click_text(None), alert=True)
            return
        current = session.decision_id == decision.id and session.state is not None
        if decision.expired():
            await self._show_decided(await self.decisions.decide(decision.id, "expired", ""), reply)
            if current:
                self._drop_pending(session)
            await notify(event, stale_click_text(decision), alert=True)
            return
        if decision.status != "pending" or not current:
            await notify(event, stale_click_text(decision), alert=True)
            return
        if not self._may_decide(event, decision):
            who = mention(
                event.conversation.platform, decision.requester_id, decision.requester_name
            )
            verb = "approve this" if decision.kind == "approval" else "answer this"
            await notify(event, f"Only {who} can {verb}.", alert=True)
            return

        by = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
        if decision.kind == "approval" and event.choice in (APPROVE, REJECT):
            approved = event.choice == APPROVE
            status: DecisionStatus = "approved" if approved else "rejected"
            resolution = Resolution(entry_id=reply.entry_id, approved=approved)
            toast, answer = ("Approved" if approved else "Rejected"), None
        elif (
            decision.kind == "question"
            and event.choice.isdigit()
            and int(event.choice) < len(decision.options)
        ):
            status = "answered"
            answer = decision.options[int(event.choice)]
            resolution = Resolution(entry_id=reply.entry_id, answer=answer)
            toast = answer
        else:
            await notify(event, "I didn't understand that button.", alert=True)
            return
        decided = await self.decisions.decide(decision.id, status, by)
        if decided is None:  # decided a moment ago by someone else
            await notify(event, stale_click_text(await self.decisions.get(decision.id)), alert=True)
            return
        await notify(event, toast)
        await self._show_decided(decided, reply, answer=answer)
        await self._resume(turn, resolution)

    async def _resume(self, turn: Turn, resolution: Resolution) -> None:
        state = turn.session.state
        assert state is not None
        turn.session.resolving = resolution
        outcome = await self._call(
            turn,
            lambda p: self.agent.resume(
                state,
                answer=resolution.answer,
                approved=resolution.approved,
                reason=resolution.reason,
                on_progress=p,
            ),
        )
        await self._deliver(outcome, turn)

    async def _notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        """Answer a button press; a failure only costs the presser a toast."""
        adapter = self.adapters[action.conversation.platform]
        try:
            await adapter.notify(action, text, alert=alert)
        except Exception:
            log.warning("could not answer a button press in %s", action.conversation.id)

    def _may_decide(self, event: Inbound, decision: Decision) -> bool:
        """The requester always; in a shared chat, configured approvers (ids or groups) too."""
        actor = event.actor
        if actor.user_id == decision.requester_id:
            return True
        if decision.is_direct:
            return False
        return actor.user_id in self.approvers or bool(self.approvers.intersection(actor.groups))

    # --- running the agent and showing what came of it --------------------------------------

    async def _call(self, turn: Turn, invoke: Callable[..., Awaitable[Outcome]]) -> Outcome:
        event, session, reply = turn.event, turn.session, turn.reply
        session.status = "running"
        session.decision_id = None
        await self.sessions.save(turn.lease, session)

        latest: list[str] = []
        said: list[int] = []  # the step whose status is the model's own words
        showing = False

        async def show(text: str) -> None:
            nonlocal showing
            showing = True
            self._progress_shown.add(event.conversation.id)
            try:
                await reply.adapter.progress(event.conversation, text)
            except Exception:
                log.debug("progress update failed in %s", event.conversation.id)

        turn.stream = self._answer_stream(turn)

        async def progress(update: ProgressEvent) -> None:
            if update.kind in ("text_delta", "text_reset"):
                if turn.stream is not None:
                    await turn.stream.on_progress(update)
                if status := update.detail.get("status"):
                    latest[:], said[:] = [status], [update.step]
                    if showing:
                        await show(status)
                return
            text = "Thinking…" if update.kind == "step_started" else None
            if update.kind == "tool_started" and update.tool and said != [update.step]:
                text = f"Using {update.tool}…"  # unless the model said what it is doing
            if text is not None:
                latest[:] = [text]
                if showing:
                    await show(text)

        async def show_when_slow() -> None:
            # A quick answer needs no "typing…": show progress only once a run takes a while.
            await asyncio.sleep(PROGRESS_DELAY)
            if latest:
                await show(latest[0])
            # a status that fades by itself ("typing") is shown again while the run works
            refresh = getattr(reply.adapter, "progress_refresh", None)
            while refresh and latest:
                await asyncio.sleep(refresh)
                await show(latest[0])

        started = time.monotonic()
        if turn.stream is not None:
            await turn.stream.prepare()
        timer = asyncio.create_task(show_when_slow())
        try:
            outcome = await invoke(progress)
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
            if turn.stream is not None:
                await turn.stream.settle()
        metrics.RUN_SECONDS.observe(time.monotonic() - started)
        metrics.RUNS.labels(type(outcome).__name__.lower()).inc()
        metrics.RUN_STEPS.observe(outcome.trace.iterations)
        for step in outcome.trace.steps:
            for call in step.tool_calls:
                metrics.TOOL_CALLS.labels(call.tool, call.status).inc()
        for call in outcome.trace.resumed_calls:
            metrics.TOOL_CALLS.labels(call.tool, call.status).inc()
        if self.charge is not None:
            try:
                await self.charge(event, outcome.trace.usage)
            except Exception:  # the answer matters more than the bookkeeping
                log.exception("could not charge a run's usage")
        if self.after_run is not None and isinstance(outcome, Finished | Failed):
            try:
                turn.note = await self.after_run(outcome)
            except Exception:
                log.exception("after-run hook failed")
        return outcome

    async def _deliver(self, outcome: Outcome, turn: Turn) -> None:
        event, session, reply = turn.event, turn.session, turn.reply
        session.state = outcome.state
        session.resolving = None
        if isinstance(outcome, Finished | Failed):
            self._settle(session)
            answer = reply.allow(outcome_message(outcome))
            if turn.stream is not None:
                try:
                    await turn.stream.finish(answer)  # under the key the send would use
                except Exception as exc:
                    if redis_away(exc):
                        raise  # the entry is handled again once Redis is back
                    # The platform did not take it: parked for redelivery, or given up if
                    # refused for good, exactly as the outbox does with any reply.
                    key = reply.key_for("outcome")
                    await self.outbox.undelivered(key, event.conversation, answer, exc)
            else:
                await reply.send(answer, "outcome")
            if turn.note is not None:
                await reply.send(turn.note, "note")
            return
        if turn.stream is not None:
            await turn.stream.discard()
        kind = "question" if isinstance(outcome, AwaitingAnswer) else "approval"
        message = outcome_message(outcome)
        decision = self.decisions.new(
            id=decision_id_for(event.conversation.id, reply.entry_id),
            kind=kind,
            conversation_id=event.conversation.id,
            requester_id=outcome.state.context.user_id,
            requester_name=outcome.state.context.user_name,
            text=message.text,
            options=outcome.options if isinstance(outcome, AwaitingAnswer) else [],
            is_direct=outcome.state.context.is_direct,
        )
        await self.decisions.save(decision)
        session.decision_id = decision.id
        session.status = "awaiting_answer" if kind == "question" else "awaiting_approval"
        if isinstance(outcome, AwaitingApproval) and outcome.plan.uncertain:
            steps = "\n".join(f"• {step.description}" for step in outcome.plan.uncertain)
            await reply.send(OutboundMessage(text=UNCERTAIN_TEXT.format(steps=steps)), "uncertain")
        ref = await reply.send(outcome_message(outcome, decision.id), "outcome")
        if ref is not None:
            decision.message_id = ref.message_id
            await self.decisions.save(decision)

    async def delivered(self, message: OutboundMessage, ref: MessageRef) -> None:
        """A parked message went out late: attach a decision prompt to its decision."""
        if message.decision_id is None:
            return
        decision = await self.decisions.get(message.decision_id)
        if decision is not None and decision.message_id is None:
            decision.message_id = ref.message_id
            await self.decisions.save(decision)

    def _answer_stream(self, turn: Turn) -> AnswerStream | None:
        if self.stream_interval is None:
            return None
        event, reply = turn.event, turn.reply
        live = live_message(
            reply.adapter,
            event.conversation,
            user_id=event.actor.user_id,
            team_id=event.actor.team_id or event.conversation.team_id,
            is_direct=event.is_direct,
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
        )

    async def _pending(self, session: Session) -> Decision | None:
        """The session's pending decision, unless it expired (then the session moves on)."""
        if session.decision_id is None:
            return None
        decision = await self.decisions.get(session.decision_id)
        if decision is None or decision.status != "pending" or decision.expired():
            self._drop_pending(session)
            return None
        return decision

    def _drop_pending(self, session: Session) -> None:
        if session.state is not None:
            session.state.abandon("Not answered: the request expired.")
        self._settle(session)

    @staticmethod
    def _settle(session: Session) -> None:
        session.status = "idle"
        session.decision_id = None
        session.resolving = None

    async def _show_decided(
        self, decision: Decision | None, reply: Reply, answer: str | None = None
    ) -> None:
        if decision is None or decision.message_id is None:
            return
        message = decided_message(decision)
        if answer is not None:
            message = replace(message, text=f"{message.text}: {answer}")
        ref = MessageRef(conversation=reply.conversation, message_id=decision.message_id)
        try:
            await reply.edit(ref, message, f"decided:{decision.id}")
        except Exception:
            log.warning("could not update the decision message in %s", reply.conversation.id)

    async def fail_quietly(self, entry_id: str, event: Inbound) -> None:
        """Tell the user something went wrong, once, after an unexpected error."""
        adapter = self.adapters.get(event.conversation.platform)
        if adapter is None:
            return
        reply = Reply(
            outbox=self.outbox,
            adapter=adapter,
            entry_id=f"{entry_id}:error",
            conversation=event.conversation,
        )
        try:
            await reply.send(OutboundMessage(text=ERROR_TEXT), "reply")
        except Exception:
            log.exception("could not report an error in %s", event.conversation.id)
