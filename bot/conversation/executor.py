"""Carries out what the engine decides, for one inbox entry under the conversation's lock.

`handle` loads what `decide` needs (the session, and the decision the event is about: one
read each), then performs the effects in order. An effect the world answers (`Admit`,
`Claim`, `Run`, `Resume`) ends its list; its answer goes back to `decide` as a follow-up.
The session is stored once the entry is done, with the entry marked handled and a decision
it opened (a press on its prompt is a later entry), and before a resumed run (for replays).

Every reply goes through the outbox under a key derived from the entry and what the reply is
for, so processing the same entry twice never posts twice. Delivery failure is an outcome,
not an error: a send the platform did not take is the outbox's to retry, park or give up,
and the conversation settles all the same. Redis being away escapes (the stored session
left as it was), and so does a bug (a run's conversation left idle): the worker retries.
The session's status moves only as the table in `states.py` allows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import get_args

from adapters.base import (
    ConversationKey,
    Inbound,
    InboundAction,
    InboundMessage,
    MessageRef,
    OutboundMessage,
)
from adapters.platform import ChatAdapter
from agent.deferred import Plan, new_id
from agent.loop import Agent
from agent.messages import ContentBlock
from bot.conversation import effects as fx
from bot.conversation.attachments import Gathered
from bot.conversation.commands import Commands
from bot.conversation.engine import ERROR_TEXT, INTERRUPTED_CALL, Policy, decide, pending_id
from bot.conversation.privately import handed_over
from bot.conversation.render import typed_mentions, unreachable_line
from bot.conversation.running import (
    Admission,
    Called,
    Reply,
    Runner,
    context_for,
    run_context,
    session_ended,
)
from bot.conversation.seam import Acting, Feature, registry
from bot.conversation.states import Move, advance
from bot.conversation.stopping import Stoppable, stopped, watching
from bot.ops.health import redis_away
from bot.ops.logs import log_context
from bot.runtime.decisions import Decision, DecisionStore
from bot.runtime.holding import Holding, PendingWrites
from bot.runtime.keys import private_press_event, reply_key
from bot.runtime.outbox import Outbox
from bot.runtime.sessions import Session, SessionStore
from bot.runtime.stops import Stops

log = logging.getLogger(__name__)
FEATURE_EFFECTS = frozenset(get_args(fx.FeatureEffect))

MAX_ROUNDS = 8  # follow-ups per entry; the rules need at most four (admit, claim, run, ran)


@dataclass(kw_only=True)
class EntryTurn:
    """One inbox entry being handled."""

    received: fx.Received
    session: Session
    pending: Decision | None
    reply: Reply
    holding: Holding  # the conversation's lock, which every session save proves
    writes: PendingWrites  # records and acknowledgements for the next session save
    called: Called | None = None  # the agent call of this entry, once it returned
    opened: Decision | None = None  # the decision this entry asks for, until it is stored

    @property
    def event(self) -> Inbound:
        return self.received.event


@dataclass(kw_only=True)
class Executor:
    agent: Agent
    adapters: dict[str, ChatAdapter]
    sessions: SessionStore
    decisions: DecisionStore
    outbox: Outbox
    commands: Commands
    runner: Runner
    approvers: frozenset[str] = frozenset()
    max_message_chars: int | None = None  # None: the adapters' own limits
    # Core, not features: every message is admitted (`Admit`, the rate and budget limits)
    # before anything else; and a stop is /cancel, a core rule, reaching the run this
    # executor is awaiting, which no effect can do (effects wait for the run to end).
    admission: Admission | None = None
    stops: Stops | None = None  # stop requests that reach a run while it works
    # what the features bring (seam.py): /schedules, /connections, followed tasks, "Always",
    # the check and count of Parley's own runs (a schedule's slot, a trigger), voice notes
    features: Sequence[Feature] = ()
    standing_everywhere: bool = False  # a standing approval holds in every chat of its giver
    # Queues an event for another conversation: a press on a private prompt in someone's
    # private chat belongs to the shared chat the prompt came from (privately.py).
    forward: Callable[[Inbound], Awaitable[bool]] | None = None

    def __post_init__(self) -> None:
        self._handlers = registry(self.features)

    async def handle(self, entry_id: str, event: Inbound, holding: Holding) -> None:
        session = await self.sessions.load(holding.conversation_id, holding)
        if session.done_with(entry_id):
            return
        adapter = self.adapters.get(event.conversation.platform)
        if adapter is None:
            log.error("no adapter for %s; dropping %s", event.conversation.platform, entry_id)
            return
        await adapter.acting_in(event.conversation)
        reply = Reply(
            outbox=self.outbox,
            adapter=adapter,
            entry_id=entry_id,
            conversation=event.conversation,
            allowed_mentions=typed_mentions(event),
            later=holding.writes,
            first_try=holding.first_try(entry_id),
            reply_url=event.reply_url if isinstance(event, InboundMessage) else None,
            reply_as=event.actor.user_id,
            press_url=event.reply_url if isinstance(event, InboundAction) else None,
            reply_to=None if event.is_direct else getattr(event, "message_id", None),
            unreachable=unreachable_line(adapter.addressing),
        )
        run_id = (
            session.state.run_id if session.state is not None and session.status != "idle" else ""
        )
        log_context.set({"conversation": event.conversation.id, "entry": entry_id, "run": run_id})
        turn = EntryTurn(
            received=fx.Received(entry_id=entry_id, event=event),
            session=session,
            pending=await self._pending(session, event),
            reply=reply,
            holding=holding,
            writes=holding.writes,
        )
        if isinstance(event, InboundAction) and handed_over(turn.pending, event):
            await self._hand_over(turn, event)
            await self._finish(turn, entry_id)
            return
        try:
            await self._play(turn)
        except Exception as exc:
            if redis_away(exc):
                # The stored session stands: once Redis is back the entry is handled again
                # the same way (a decision it resolved is resumed, not lost).
                await self.runner.clear_progress(turn.reply.adapter, turn.event.conversation)
                raise
            # Don't leave the conversation "working" on a run whose outcome is lost; the
            # entry stays unhandled, so the worker may try it again (then dead-letters it).
            if session.status == "running":
                if session.state is not None:
                    session.state.abandon(INTERRUPTED_CALL)
                advance(session, "settle")
            await self._finish(turn, None)
            raise
        await self._finish(turn, entry_id)

    async def _hand_over(self, turn: EntryTurn, press: InboundAction) -> None:
        """Queue the press in the conversation of the private prompt it was made on."""
        assert turn.pending is not None
        there = ConversationKey.parse(turn.pending.conversation_id)
        moved = replace(
            press, conversation=there, event_id=private_press_event(press.event_id), is_direct=False
        )
        if self.forward is None or not await self.forward(moved):
            log.info("a private press was not handed to %s", there.id)

    async def _pending(self, session: Session, event: Inbound) -> Decision | None:
        """The decision the event is about (`engine.pending_id` says which), if any."""
        decision_id = pending_id(session, event)
        return await self.decisions.get(decision_id) if decision_id else None

    async def _play(self, turn: EntryTurn) -> None:
        next_event: fx.Event | None = turn.received
        for _ in range(MAX_ROUNDS):
            if next_event is None:
                return
            effects = decide(turn.session, turn.pending, next_event, self._policy(turn))
            next_event = None
            for effect in effects:
                next_event = await self._perform(turn, effect)
                if next_event is not None:
                    break  # an answered effect ends its list
        if next_event is not None:
            log.error("the rules did not settle entry %s", turn.received.entry_id)

    def _policy(self, turn: EntryTurn) -> Policy:
        return Policy(
            greeting=turn.reply.adapter.greeting,
            now=time.time(),
            approvers=self.approvers,
            max_message_chars=self.max_message_chars,
            addressing=turn.reply.adapter.addressing,
            standing_everywhere=self.standing_everywhere,
            brought=frozenset(self._handlers),
        )

    async def _finish(self, turn: EntryTurn, entry_id: str | None) -> None:
        """Clear progress; store the session (the entry once handled, a decision it opened)."""
        await self.runner.clear_progress(turn.reply.adapter, turn.event.conversation)
        if entry_id is not None:
            turn.session.last_entry = entry_id
        also = self.decisions.queued(turn.opened) if turn.opened else None
        await self.sessions.save(turn.holding, turn.session, turn.writes, also)

    # --- effects ----------------------------------------------------------------------------

    async def _perform(self, turn: EntryTurn, effect: fx.Effect) -> fx.Event | None:
        session, reply, received = turn.session, turn.reply, turn.received
        match effect:
            case fx.Send(message=message, slot=slot, per_conversation=per_conversation):
                await reply.send(message, slot, per_conversation=per_conversation)
            case fx.Edit():
                ref = MessageRef(conversation=reply.conversation, message_id=effect.message_id)
                try:
                    await reply.edit(ref, effect.message, effect.slot)
                except Exception:
                    log.warning("could not update the decision message in %s", ref.conversation.id)
            case fx.Notify():
                await self._notify(turn, effect.text, alert=effect.alert)
            case fx.Admit():
                assert isinstance(turn.event, InboundMessage)
                refusal = await self.admission(turn.event) if self.admission else None
                return fx.Admitted(received=received, refusal=refusal)
            case fx.Claim():
                return await self._claim(turn, effect)
            case fx.Settle(abandon=abandon):
                if abandon is not None and session.state is not None:
                    session.state.abandon(abandon)
                    # a run waiting for a person ends without running again: its session too
                    await session_ended(reply.adapter, turn.event, "ended")
                advance(session, "settle")
            case fx.Follow():
                session.following = True
            case fx.EndSession():
                await session_ended(reply.adapter, turn.event, "stopped")
            case fx.Run():
                return await self._run(turn, effect)
            case fx.Resume():
                return await self._resume(turn, effect)
            case fx.Answer():
                await self.runner.answer(turn.called, reply, effect.message)
            case fx.Open():
                await self._open(turn, effect)
            case fx.Prompt(private_chat=str()):
                await self._prompt_privately(turn, effect)
            case fx.Prompt():
                posted = await reply.send(effect.message, "outcome")
                if turn.opened is not None and posted is not None:
                    turn.opened.message_id = posted.message_id  # stored with the session
                elif turn.opened is not None:  # parked: a late delivery must find the decision
                    await self.decisions.save(turn.opened)
                    turn.opened = None
            case fx.Command():
                await self._command(turn)
            case fx.Forget():
                assert isinstance(turn.event, InboundAction)
                text = await self.commands.forget_pressed(
                    turn.event, run_context(turn.event, org_team=reply.adapter.org_team)
                )
                await self._notify(turn, text)
                private = OutboundMessage(text=text, private_to=turn.event.actor.user_id)
                await reply.send(private, "reply")
                await self.commands.refresh_on_screen(
                    run_context(turn.event, org_team=reply.adapter.org_team),
                    self._editor(turn),
                    reply.adapter.addressing,
                )
            case _:  # mypy fails here on a core effect that goes unhandled
                return await self._feature(turn, effect)
        return None

    async def _feature(self, turn: EntryTurn, effect: fx.FeatureEffect) -> fx.Event | None:
        """A feature's effect, carried out by the feature that brought it (seam.py)."""
        handler = self._handlers.get(type(effect))
        if handler is None:
            # an effect of no kind at all stops the entry; a feature's where it is not wired
            # (/schedules without a schedule store) is only logged
            assert type(effect) in FEATURE_EFFECTS, f"no rule carries out {effect!r}"
            log.error("no feature here carries out %s", type(effect).__name__)
            return None

        async def notify(text: str, alert: bool) -> None:
            await self._notify(turn, text, alert=alert)

        acting = Acting(
            received=turn.received,
            session=turn.session,
            reply=turn.reply,
            notify=notify,
            forward=self.forward,
        )
        answered = await handler(acting, effect)
        if answered is not None and not isinstance(answered, fx.Received):
            # the entry from here on (a voice message now has its transcript as its text)
            turn.received = answered.received
        return answered

    async def _prompt_privately(self, turn: EntryTurn, prompt: fx.Prompt) -> None:
        """The prompt in the person's private chat (not tied to the decision: edits go to
        the conversation), and the conversation told whether it went."""
        reply = turn.reply
        assert prompt.private_chat is not None
        chat = ConversationKey(platform=reply.conversation.platform, chat_id=prompt.private_chat)
        key = reply.key_for("outcome")
        message = replace(prompt.message, private_to=None)  # that chat is theirs alone
        posted = await self.outbox.send(reply.adapter, key, chat, message, reply.later)
        refused = posted is None and await self.outbox.refused(key)
        told = prompt.unreachable if refused else prompt.sent
        if told is not None:
            await reply.send(told, "unreachable" if refused else "sent-privately")

    async def _notify(self, turn: EntryTurn, text: str, *, alert: bool = False) -> None:
        """Answer a button press; a failure only costs the presser a toast."""
        action = turn.event
        assert isinstance(action, InboundAction)
        try:
            await turn.reply.adapter.notify(action, text, alert=alert)
        except Exception:
            log.warning("could not answer a button press in %s", action.conversation.id)

    async def _claim(self, turn: EntryTurn, claim: fx.Claim) -> fx.Claimed:
        pending = turn.pending  # read for this event already: the claim is about it
        if pending is None or pending.id != claim.decision_id:
            pending = await self.decisions.get(claim.decision_id)
        decided = pending and await self.decisions.decide(pending, claim.status, claim.by)
        current = None
        if decided is None and isinstance(turn.event, InboundAction):
            current = await self.decisions.get(claim.decision_id)  # to say who was first
        return fx.Claimed(
            received=turn.received, status=claim.status, decided=decided, current=current
        )

    async def _command(self, turn: EntryTurn) -> None:
        event = turn.event
        assert isinstance(event, InboundMessage)
        context = run_context(event, org_team=turn.reply.adapter.org_team)
        addressing = turn.reply.adapter.addressing
        answer = await self.commands.reply(event, context, turn.session, addressing)
        posted = await turn.reply.send(answer, "reply")
        if (event.command or "").lower() == "memories":
            await self.commands.listed(context, posted.message_id if posted else None)
        elif (event.command or "").lower() == "forget":
            await self.commands.refresh_on_screen(context, self._editor(turn), addressing)

    def _editor(self, turn: EntryTurn) -> Callable[[str, OutboundMessage], Awaitable[None]]:
        """Edits a message of this conversation once per entry (a list shown again)."""

        async def edit(message_id: str, message: OutboundMessage) -> None:
            ref = MessageRef(conversation=turn.reply.conversation, message_id=message_id)
            await turn.reply.edit(ref, message, "refresh")

        return edit

    # --- runs -------------------------------------------------------------------------------

    async def _run(self, turn: EntryTurn, run: fx.Run) -> fx.Ran | None:
        event, session = turn.event, turn.session
        assert isinstance(event, InboundMessage)
        run_id = new_id()  # in the log context before the run's first line
        log_context.set({**(log_context.get() or {}), "run": run_id})
        history = session.state
        if run.own:  # Parley's own objective reads what it was checked with, not a thread
            gathered = Gathered(objective=event.text, blocks=list(run.preface), usable=True)
        else:
            # a thread followed since a bare mention is taken part in as much as one with a run
            following = history is not None or session.following
            gathered = await self.runner.gather(event, turn.reply, following=following)
        if not gathered.usable:
            return None
        context = await context_for(turn.reply.adapter, event, run.standing)
        private = history is not None and history.private_to == context.user_id
        ran = await self._call(
            turn,
            private=private,
            title=gathered.objective,
            invoke=lambda progress, stop: self.agent.run(
                gathered.objective,
                context,
                history=history,
                on_progress=progress,
                attachments=gathered.blocks,
                stop=stop,
                run_id=run_id,
            ),
        )
        return replace(ran, header=run.header)

    async def _resume(self, turn: EntryTurn, resume: fx.Resume) -> fx.Ran:
        state = turn.session.state
        assert state is not None
        resolution = resume.resolution
        turn.session.resolving = resolution
        blocks: list[ContentBlock] = []
        if resume.attachments and isinstance(turn.event, InboundMessage):
            blocks = (await self.runner.gather(turn.event, turn.reply, following=True)).blocks
        elif isinstance(turn.event, InboundMessage):
            await self.runner.saw(turn.event)
        plan = state.pending_plan
        private = state.private_to is not None or bool(
            resolution.approved and plan and any(step.private for step in plan.steps)
        )
        return await self._call(
            turn,
            private=private,
            plan=plan.plan() if plan is not None and resolution.approved else None,
            invoke=lambda progress, stop: self.agent.resume(
                state,
                answer=resolution.answer,
                approved=resolution.approved,
                reason=resolution.reason,
                on_progress=progress,
                attachments=blocks,
                stop=stop,
            ),
        )

    async def _call(
        self,
        turn: EntryTurn,
        *,
        invoke: Stoppable,
        private: bool,
        title: str | None = None,
        plan: Plan | None = None,
    ) -> fx.Ran:
        session = turn.session
        requester = (
            session.state.context.user_id
            if session.resolving is not None and session.state is not None
            else turn.event.actor.user_id
        )
        advance(session, "run")
        if session.resolving is not None:
            # A replay must resume the way this entry resolved the decision. A new run needs
            # no save: a replay after a crash starts it again from the stored session.
            await self.sessions.save(turn.holding, session, turn.writes)
        with watching(
            self.stops, turn.event, turn.received.entry_id, requester, self.approvers
        ) as watch:
            stop = watch.stop if watch is not None else None
            turn.called = await self.runner.call(
                turn.event,
                turn.reply,
                lambda progress: invoke(progress, stop),
                private=private,
                title=title,
                plan=plan,
            )
        outcome = turn.called.outcome
        session.state = outcome.state
        session.resolving = None
        if watch is not None and watch.by is not None and stopped(outcome):
            session.stopped_by = watch.by.entry_id
        return fx.Ran(received=turn.received, outcome=outcome, note=turn.called.note)

    async def _open(self, turn: EntryTurn, opened: fx.Open) -> None:
        await self.runner.discard(turn.called)
        turn.opened = self.decisions.new(
            id=opened.decision_id,
            kind=opened.kind,
            conversation_id=turn.event.conversation.id,
            requester_id=opened.requester_id,
            requester_name=opened.requester_name,
            text=opened.text,
            options=list(opened.options),
            is_direct=opened.is_direct,
            requester_only=opened.requester_only,
            private_to=opened.private_to,
        )
        move: Move = "ask" if opened.kind == "question" else "seek_approval"
        advance(turn.session, move, decision_id=turn.opened.id)

    async def delivered(self, message: OutboundMessage, ref: MessageRef) -> None:
        """A parked message went out late: attach a decision prompt to its decision."""
        if message.decision_id is None:
            return
        decision = await self.decisions.get(message.decision_id)
        if decision is not None and decision.message_id is None:
            decision.message_id = ref.message_id
            await self.decisions.save(decision)

    async def fail_quietly(self, entry_id: str, event: Inbound) -> None:
        """Tell the user something went wrong, once, after an unexpected error."""
        adapter = self.adapters.get(event.conversation.platform)
        if adapter is None:
            return
        reply = Reply(
            outbox=self.outbox,
            adapter=adapter,
            entry_id=reply_key(entry_id, "error"),
            conversation=event.conversation,
        )
        try:
            # a run that lost its lock may have answered (or be answering): no Sorry beside it
            if not await self.outbox.give_up(reply_key(entry_id, "outcome")):
                log.info("not reporting an error for %s: its answer is out", entry_id)
                return
            await reply.send(OutboundMessage(text=ERROR_TEXT), "reply")
        except Exception:
            log.exception("could not report an error in %s", event.conversation.id)
