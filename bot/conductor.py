"""What one inbound event means for its conversation, decided under the conversation's lock.

A message starts a run, answers a pending question, or — while an approval waits — rejects
the plan with the message as the reason. A button press decides a pending question or
approval if the presser may. Every reply goes through the outbox with a key derived from the
inbox entry, so processing the same entry twice never posts twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from adapters.base import (
    ChatAdapter,
    ConversationKey,
    Inbound,
    InboundAction,
    InboundMessage,
    MessageRef,
    OutboundMessage,
)
from adapters.text import too_long
from agent.loop import Agent
from agent.outcomes import AwaitingAnswer, Failed, Finished, Outcome
from agent.protocols import ProgressEvent, RunContext
from bot import metrics
from bot.commands import MEMORY_ACTION, Commands
from bot.decisions import Decision, DecisionStore
from bot.decisions import Status as DecisionStatus
from bot.locks import Lease
from bot.logs import log_context
from bot.outbox import Outbox
from bot.render import APPROVE, REJECT, decided_message, mention, outcome_message, stale_click_text
from bot.sessions import Resolution, Session, SessionStore

log = logging.getLogger(__name__)

FEEDBACK_NOTE = "Understood — I won't go ahead with that plan. I'll take your message into account."
WAIT_FOR_REQUESTER = "I'm waiting for {who} to answer first; ask me again once that's settled."
ERROR_TEXT = "Sorry — something went wrong on my side. Please try again."
PROGRESS_DELAY = 0.5  # seconds a run works before the chat shows that it is working

# Admission check before a run: returns a refusal text, or None to go ahead.
Admission = Callable[[InboundMessage], Awaitable[str | None]]
# Called with the event and the tokens an agent call used.
Charge = Callable[[InboundMessage | InboundAction, int], Awaitable[None]]


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
    """Sends for one inbox entry, each under its own outbox key."""

    outbox: Outbox
    adapter: ChatAdapter
    entry_id: str
    conversation: ConversationKey
    sequence: int = 0

    async def send(self, message: OutboundMessage) -> MessageRef | None:
        self.sequence += 1
        key = f"{self.entry_id}:{self.sequence}"
        return await self.outbox.send(self.adapter, key, self.conversation, message)

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        self.sequence += 1
        await self.outbox.edit(self.adapter, f"{self.entry_id}:{self.sequence}", ref, message)


@dataclass(kw_only=True)
class Turn:
    """One inbox entry being handled."""

    event: Inbound
    session: Session
    reply: Reply
    lease: Lease
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
        finally:
            if event.conversation.id in self._progress_shown:
                self._progress_shown.discard(event.conversation.id)
                try:
                    await adapter.progress(event.conversation, None)
                except Exception:
                    log.warning("could not clear progress in %s", event.conversation.id)
        session.last_entry = entry_id
        await self.sessions.save(lease, session)

    # --- messages ---------------------------------------------------------------------------

    async def _on_message(self, turn: Turn, event: InboundMessage) -> None:
        session, reply = turn.session, turn.reply
        context = run_context(event)
        if event.command:
            result = await self.commands.handle(event, context, session)
            if result.cancel:
                await self._cancel(event, session, reply)
            private_to = event.actor.user_id if result.private else None
            await reply.send(
                OutboundMessage(
                    text=result.text,
                    private_to=private_to,
                    buttons=result.buttons,
                    decision_id=MEMORY_ACTION if result.buttons else None,
                )
            )
            return
        if not event.mentioned and session.state is None:
            return  # a thread message in a conversation Parley is not part of
        if len(event.text) > self.max_message_chars:
            text = too_long(len(event.text), self.max_message_chars)
            await reply.send(OutboundMessage(text=text))
            return
        if self.admission is not None and (refusal := await self.admission(event)):
            await reply.send(OutboundMessage(text=refusal))
            return

        decision = await self._pending(session)
        if decision is None or session.state is None:
            history = session.state
            outcome = await self._call(
                turn, lambda p: self.agent.run(event.text, context, history=history, on_progress=p)
            )
            await self._deliver(outcome, turn)
            return
        if not self._may_decide(event, decision):
            who = mention(
                event.conversation.platform, decision.requester_id, decision.requester_name
            )
            await reply.send(OutboundMessage(text=WAIT_FOR_REQUESTER.format(who=who)))
            return
        by = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
        if decision.kind == "question":
            decided = await self.decisions.decide(decision.id, "answered", by)
            await self._show_decided(decided, reply)
            resolution = Resolution(entry_id=reply.entry_id, answer=event.text)
        else:
            decided = await self.decisions.decide(decision.id, "rejected", by)
            await self._show_decided(decided, reply)
            await reply.send(OutboundMessage(text=FEEDBACK_NOTE))
            resolution = Resolution(entry_id=reply.entry_id, approved=False, reason=event.text)
        await self._resume(turn, resolution)

    async def _cancel(self, event: InboundMessage, session: Session, reply: Reply) -> None:
        decision = await self._pending(session)
        if decision is not None:
            by = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
            await self._show_decided(
                await self.decisions.decide(decision.id, "cancelled", by), reply
            )
        if session.state is not None:
            session.state.abandon("Not run: the user cancelled.")
        self._settle(session)

    # --- button presses ---------------------------------------------------------------------

    async def _on_action(self, turn: Turn, event: InboundAction) -> None:
        session, reply = turn.session, turn.reply
        notify = reply.adapter.notify
        if event.decision_id == MEMORY_ACTION:  # a Forget button: no run involved
            text = await self.commands.forget_pressed(event, run_context(event))
            await notify(event, text)
            await reply.send(OutboundMessage(text=text, private_to=event.actor.user_id))
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
        showing = False

        async def show(text: str) -> None:
            nonlocal showing
            showing = True
            self._progress_shown.add(event.conversation.id)
            try:
                await reply.adapter.progress(event.conversation, text)
            except Exception:
                log.debug("progress update failed in %s", event.conversation.id)

        async def progress(update: ProgressEvent) -> None:
            text = "Thinking…" if update.kind == "step_started" else None
            if update.kind == "tool_started" and update.tool:
                text = f"Using {update.tool}…"
            if text is not None:
                latest[:] = [text]
                if showing:
                    await show(text)

        async def show_when_slow() -> None:
            # A quick answer needs no "typing…": show progress only once a run takes a while.
            await asyncio.sleep(PROGRESS_DELAY)
            if latest:
                await show(latest[0])

        started = time.monotonic()
        timer = asyncio.create_task(show_when_slow())
        try:
            outcome = await invoke(progress)
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        metrics.RUN_SECONDS.observe(time.monotonic() - started)
        metrics.RUNS.labels(type(outcome).__name__.lower()).inc()
        metrics.RUN_STEPS.observe(outcome.trace.iterations)
        for step in outcome.trace.steps:
            for call in step.tool_calls:
                metrics.TOOL_CALLS.labels(call.tool, call.status).inc()
        for call in outcome.trace.resumed_calls:
            metrics.TOOL_CALLS.labels(call.tool, call.status).inc()
        if self.charge is not None:
            await self.charge(event, outcome.trace.usage.total)
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
            await reply.send(outcome_message(outcome))
            if turn.note is not None:
                await reply.send(turn.note)
            self._settle(session)
            return
        kind = "question" if isinstance(outcome, AwaitingAnswer) else "approval"
        message = outcome_message(outcome)
        decision = self.decisions.new(
            kind=kind,
            conversation_id=event.conversation.id,
            requester_id=outcome.state.context.user_id,
            requester_name=outcome.state.context.user_name,
            text=message.text,
            options=outcome.options if isinstance(outcome, AwaitingAnswer) else [],
            is_direct=outcome.state.context.is_direct,
        )
        await self.decisions.save(decision)
        ref = await reply.send(outcome_message(outcome, decision.id))
        if ref is not None:
            decision.message_id = ref.message_id
            await self.decisions.save(decision)
        session.decision_id = decision.id
        session.status = "awaiting_answer" if kind == "question" else "awaiting_approval"

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
            message = OutboundMessage(text=f"{message.text}: {answer}")
        ref = MessageRef(conversation=reply.conversation, message_id=decision.message_id)
        try:
            await reply.edit(ref, message)
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
            await reply.send(OutboundMessage(text=ERROR_TEXT))
        except Exception:
            log.exception("could not report an error in %s", event.conversation.id)
