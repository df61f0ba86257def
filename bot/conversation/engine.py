"""What an event means for its conversation: every rule, as one pure function.

`decide(session, pending, event, policy)` reads the session, the decision the event is about
(`pending`: the session's pending decision for a message, the pressed button's decision for
a button press) and the event, and returns the effects to carry out, in order (effects.py).
It awaits nothing, reads no clock but `policy.now`, and changes nothing it is given.

A message starts a run, answers a pending question, or — while an approval waits — rejects
the plan with the message as the reason. A button press decides a pending question or
approval if the presser may: the requester always, in a shared chat the configured approvers
too. A replayed entry that was resolving a decision when its worker died resumes the same
way. Every sentence Parley says about a conversation is here, beside the rule that says it,
or in its book of sentences (texts.py) for the commands, files, schedules and prompts that
say them; the few said outside the effects (a failure, a lost reply, a run's status line) are
passed from here as data; render.py formats outcomes and decisions. The session's states and the moves between them
are a table beside this one (states.py), which the executor's moves go through.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from adapters.base import (
    Addressing,
    Inbound,
    InboundAction,
    InboundMessage,
    OutboundMessage,
    is_stop,
)
from adapters.traits import mention
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Failed, Finished
from bot.conversation import always, connect_privately, privately
from bot.conversation.commands import bare_mention_line, help_text, unknown_command
from bot.conversation.connected import as_code, connected
from bot.conversation.effects import (
    Admit,
    Admitted,
    Answer,
    CancelTasks,
    CheckOwn,
    Claim,
    Claimed,
    Command,
    ConfirmConnection,
    ConnectionButton,
    Edit,
    Effect,
    EndSession,
    Event,
    Follow,
    Forget,
    ListConnections,
    ListSchedules,
    NotACode,
    Notify,
    Open,
    OwnChecked,
    OwnRan,
    Ran,
    Received,
    Resume,
    Run,
    ScheduleButton,
    Send,
    Settle,
    TasksCancelled,
    Transcribe,
    Transcribed,
)
from bot.conversation.render import (
    ALWAYS,
    APPROVE,
    MEMORY_ACTION,
    REJECT,
    continuations,
    decided_line,
    decided_message,
    deciders,
    outcome_message,
    stale_click_text,
)
from bot.conversation.running import StatusLines
from bot.conversation.stopping import late_stop
from bot.conversation.texts import NOT_ITS_MESSAGE, OWN_RUN_SKIPPED, UNKNOWN_BUTTON
from bot.conversation.yes_no import verdict
from bot.features.connections.commands import CONNECTION_ACTION, STANDING_ACTION
from bot.features.schedules.commands import SCHEDULE_ACTION
from bot.runtime.decisions import Decision, decision_id_for
from bot.runtime.decisions import Status as DecisionStatus
from bot.runtime.permissions import may_act
from bot.runtime.sessions import Resolution, Session

NOT_ALLOWED = "Sorry — I'm a private assistant and can't help you here."
PAIRING_CODE = (
    "I don't know you yet. To talk with me, ask the person who runs me to accept your pairing "
    "code {code} (valid for an hour): `parley pairing approve {code}` on the server, or "
    "`/pair {code}` sent to me privately by an approver."
)
PAIRING_PRIVATELY = (
    "I only talk with people I'm paired with. Message me privately for a pairing code."
)
TEXT_ONLY = (
    "I can read text, photos and files (images, PDFs, text files) — not this kind of message."
)
TOO_LONG = (
    "That message is too long for me ({length:,} characters; my limit is {limit:,}). "
    "Could you shorten it or split it up?"
)

LONGEST = 40_000  # characters: no platform sends longer (Slack's maximum)
HEARD = "🎤 “{text}”"
QUOTED = 300  # characters of a transcript said back

FEEDBACK_NOTE = "Understood — I won't go ahead with that plan. I'll take your message into account."
NOT_YOURS_TO_CANCEL = "Only {who} or an approver can cancel what I'm waiting on here."
WAIT_FOR_REQUESTER = "I'm waiting for {who} to answer first; ask me again once that's settled."
NOT_YOURS_TO_DECIDE = "Only {who} can {verb}."
UNCERTAIN_TEXT = (
    "I was interrupted while doing this, so I can't tell whether it happened:\n{steps}\n"
    "I won't try again unless you approve it once more."
)
NOTHING_TO_CANCEL = "There's nothing to cancel."
CANCELLED = "Cancelled. What would you like to do next?"
# What the model is told about calls that never ran.
CANCELLED_NOTE = "Not run: the user cancelled."
EXPIRED_NOTE = "Not answered: the request expired."
INTERRUPTED_CALL = "Interrupted: the run failed before this call's result was known."

# Said outside any one rule, passed as data to who says them: after an entry failed for good
# (the executor), for a reply given up on (the outbox), and as a run's status line (the runner).
ERROR_TEXT = "Sorry — something went wrong on my side. Please try again."
LOST_TEXT = (
    "An earlier reply of mine could not be delivered. Please ask me again if you still need it."
)
STATUS_LINES = StatusLines(thinking="Thinking…", using="Using {tool}…")


# Parley's own objectives (a schedule's slot, a webhook trigger): checked before they run
# (`CheckOwn`), and never answer a pending question or decide a plan
OWN_KINDS = ("scheduled", "triggered")

# read memory or usage, or pair a person: the Commands class
ANSWERED_HERE = ("memories", "forget", "correct", "why", "instructions", "status", "pair")


@dataclass(frozen=True, kw_only=True)
class Policy:
    """What the rules need to know besides the conversation: settings and the time."""

    now: float
    approvers: frozenset[str] = frozenset()  # user ids or group ids
    max_message_chars: int | None = None  # None: only the adapter's (its platform's)
    addressing: Addressing = Addressing()  # how people write commands and mention Parley
    greeting: str = ""  # said once to a person who opens their conversation with Parley
    standing_everywhere: bool = False  # a standing approval holds in every chat of its giver
    brought: frozenset[type] = frozenset()  # the feature effects wired here (seam.py)


def decide(
    session: Session, pending: Decision | None, event: Event, policy: Policy
) -> list[Effect]:
    """The effects of `event`, in order (see the module docstring)."""
    if isinstance(event, Received):
        if CancelTasks in policy.brought and is_stop(event.event):
            return [CancelTasks(received=event)]  # first: a stop ends what runs on elsewhere
        return _received(session, pending, event, policy)
    if isinstance(event, TasksCancelled):
        if event.count and session.status == "idle":
            return []  # the stopped tasks were the thing to cancel
        return _received(session, pending, event.received, policy)
    if isinstance(event, Admitted):
        return _admitted(session, pending, event, policy)
    if isinstance(event, Claimed):
        return _claimed(session, pending, event, policy)
    if isinstance(event, Transcribed):
        return _transcribed(session, pending, event, policy)
    if isinstance(event, OwnChecked):
        return _own_checked(event)
    if isinstance(event, NotACode):
        message = event.received.event
        assert isinstance(message, InboundMessage)
        return _message(session, pending, message, policy, event.received.entry_id, codes=False)
    return _ran(event, policy)


def _received(
    session: Session, pending: Decision | None, received: Received, policy: Policy
) -> list[Effect]:
    if session.resolving is not None and session.resolving.entry_id == received.entry_id:
        resume = Resume(resolution=session.resolving, attachments=_has_files(received))
        # a replay of an "Always": stored again (the same grant) before the run goes on
        return [*(always.grant(session) if session.resolving.standing else []), resume]
    if session.stopped_by == received.entry_id:
        return []  # this stop reached the run it stopped, which said so
    if isinstance(received.event, InboundAction):
        return _pressed(session, pending, received.event, policy)
    return _message(session, pending, received.event, policy, received.entry_id)


def pending_id(session: Session, event: Inbound) -> str | None:
    """Which decision `decide` needs as `pending` for `event` (the executor reads it): the
    pressed button's, or the session's for a plain message, /cancel or a connected account.
    Other events never concern it, and save the read."""
    if isinstance(event, InboundAction):
        lists = (MEMORY_ACTION, SCHEDULE_ACTION, CONNECTION_ACTION, STANDING_ACTION)  # no decision
        return None if event.decision_id in lists else event.decision_id
    plain = event.kind == "text" and not event.command
    about_it = plain or is_stop(event) or event.kind == "connected"
    return session.decision_id if about_it else None


# --- messages -----------------------------------------------------------------------------


def _message(
    session: Session,
    pending: Decision | None,
    event: InboundMessage,
    policy: Policy,
    entry: str,
    *,
    codes: bool = True,
) -> list[Effect]:
    if event.kind == "pairing":  # a code once per code; the way to one once per person
        code = event.args
        text = PAIRING_CODE.format(code=code) if code else PAIRING_PRIVATELY
        slot = f"pairing:{event.actor.user_id}:{code}"
        return [Send(message=OutboundMessage(text=text), slot=slot, per_conversation=True)]
    if event.kind == "not_allowed":
        slot = f"not-allowed:{event.actor.user_id}"
        return [Send(message=OutboundMessage(text=NOT_ALLOWED), slot=slot, per_conversation=True)]
    if event.kind == "opened":  # greeted once: only a conversation with nothing handled yet
        greet = policy.greeting and session.last_entry is None and session.state is None
        greeting = OutboundMessage(text=policy.greeting)
        slot = f"greeting:{event.actor.user_id}"
        return [Send(message=greeting, slot=slot, per_conversation=True)] if greet else []
    if codes and event.kind == "text" and not event.command and (typed := as_code(event.text)):
        return [ConfirmConnection(code=typed)]  # a sign-in's one-time code, if one waits
    if event.kind == "connected":
        return connected(session, pending, event, policy.now)
    if event.command:
        return _command(session, pending, event, policy, entry)
    if event.kind in OWN_KINDS:  # admitted only while nothing waits; else skipped, said so
        if session.status == "idle":
            return [Admit()]
        what = "scheduled" if event.kind == "scheduled" else "triggered"
        return [_say(OWN_RUN_SKIPPED.format(what=what, objective=event.text[:80]))]
    if not event.mentioned and session.state is None and not session.following:
        return []  # a thread message in a conversation Parley is not part of
    if event.kind == "non_text":
        return [_say(TEXT_ONLY)]
    if event.kind == "bare_mention":
        line = bare_mention_line(policy.addressing, direct=event.is_direct)
        # In a shared thread, the question may follow as a reply without a mention.
        follow = [Follow()] if event.conversation.thread_id and not event.is_direct else []
        return [_say(line), *follow]
    length = max(event.length, len(event.text))
    limit = policy.max_message_chars or LONGEST
    if event.kind == "too_long" or length > limit:
        # An adapter cuts an over-long text at its limit.
        limit = policy.max_message_chars or min(len(event.text), LONGEST)
        return [_say(TOO_LONG.format(length=length, limit=limit))]
    return [Admit()]


def _command(
    session: Session, pending: Decision | None, event: InboundMessage, policy: Policy, entry: str
) -> list[Effect]:
    name = (event.command or "").lower()
    if name in ("help", "start"):
        help_message = OutboundMessage(
            text=help_text(policy.addressing), private_to=event.actor.user_id
        )
        return [Send(message=help_message)]
    if name in ANSWERED_HERE:
        return [Command()]
    if name == "schedules":
        return [ListSchedules()]
    if name == "connections":
        return [ListConnections()]
    if not is_stop(event):  # to the person alone: a typo is nobody else's business
        unknown = OutboundMessage(
            text=unknown_command(policy.addressing, name), private_to=event.actor.user_id
        )
        return [Send(message=unknown)]
    if session.status == "idle":  # a stop that came while a run worked says how it ended
        late = late_stop(session, event, entry, policy.approvers)
        # nothing ran when it was sent: a session still shown as working ends with it
        return [Send(message=late)] if late else [EndSession(), _say(NOTHING_TO_CANCEL)]
    decision = _live(session, pending, policy)
    if decision is None:
        return [Settle(abandon=CANCELLED_NOTE), _say(CANCELLED)]
    if not may_decide(event, decision, policy):
        return [_said_to(NOT_YOURS_TO_CANCEL, decision)]
    return [Claim(decision_id=decision.id, status="cancelled", by=_by(event))]


def _admitted(
    session: Session, pending: Decision | None, admitted: Admitted, policy: Policy
) -> list[Effect]:
    if admitted.refusal:
        return [_say(admitted.refusal)]
    event = admitted.received.event
    assert isinstance(event, InboundMessage)  # only a message is admitted
    decision = _live(session, pending, policy)
    waiting = decision is not None and session.state is not None
    if waiting and decision is not None and not may_decide(event, decision, policy):
        return [_said_to(WAIT_FOR_REQUESTER, decision)]
    if any(a.speech for a in event.attachments):
        return [Transcribe()]  # then on as if typed (`_transcribed`)
    if decision is None or session.state is None:
        # A decision that expired or went away meanwhile: the conversation moves on.
        stale = session.decision_id is not None and decision is None
        return [*([Settle(abandon=EXPIRED_NOTE)] if stale else []), *_start(event, policy)]
    status: DecisionStatus = "answered"
    if decision.kind == "approval":  # a clear yes approves; anything else rejects
        status = "approved" if verdict(event.text) else "rejected"
    return [Claim(decision_id=decision.id, status=status, by=_by(event))]


def _start(event: InboundMessage, policy: Policy) -> list[Effect]:
    """A run on the message; Parley's own objective is checked first where a feature checks
    it (`CheckOwn`), and reads nothing of the thread."""
    own = event.kind in OWN_KINDS
    return [CheckOwn()] if own and CheckOwn in policy.brought else [Run(own=own)]


def _own_checked(checked: OwnChecked) -> list[Effect]:
    """What the check says is said either way; the run starts only if it may."""
    said: list[Effect] = [_say(checked.say)] if checked.say else []
    if not checked.go:
        return said
    run = Run(own=True, header=checked.header, preface=checked.preface, standing=checked.standing)
    return [*said, run]


def _transcribed(
    session: Session, pending: Decision | None, heard: Transcribed, policy: Policy
) -> list[Effect]:
    if heard.refusal is not None:
        return [_say(heard.refusal)]
    if heard.note is not None:  # the audio unheard, its caption answered
        going_on = _admitted(session, pending, Admitted(received=heard.received), policy)
        return [_say(heard.note, slot="transcript"), *going_on]
    # Said back in one short line, so a misheard word can be put right.
    quote = heard.transcript if len(heard.transcript) <= QUOTED else heard.transcript[:QUOTED]
    line = HEARD.format(text=quote.replace("\n", " ") + ("…" if quote != heard.transcript else ""))
    going_on = _admitted(session, pending, Admitted(received=heard.received), policy)
    return [_say(line, slot="transcript"), *going_on]


# --- button presses -----------------------------------------------------------------------


def _pressed(
    session: Session, decision: Decision | None, event: InboundAction, policy: Policy
) -> list[Effect]:
    if event.decision_id == MEMORY_ACTION:
        return [Forget()]  # a Forget button: no run involved
    if event.decision_id == SCHEDULE_ACTION:
        return [ScheduleButton()]  # checks who may, itself
    if event.decision_id in (CONNECTION_ACTION, STANDING_ACTION):
        return [ConnectionButton()]  # the presser's own account or approval only
    if decision is None or decision.conversation_id != event.conversation.id:
        return [Notify(text=stale_click_text(None, policy.now), alert=True)]
    if decision.expired(policy.now):
        return [Claim(decision_id=decision.id, status="expired", by="")]
    current = session.decision_id == decision.id and session.state is not None
    if decision.status != "pending" or not current:
        return [Notify(text=stale_click_text(decision, policy.now), alert=True)]
    if not privately.bound(decision, event):  # a private run's: decided where it was put
        return [Notify(text=NOT_ITS_MESSAGE, alert=True)]
    if not may_decide(event, decision, policy):
        verb = "approve this" if decision.kind == "approval" else "answer this"
        text = NOT_YOURS_TO_DECIDE.format(who=_requester(decision), verb=verb)
        return [Notify(text=text, alert=True)]
    by = _by(event)
    if decision.kind == "approval" and event.choice == ALWAYS:
        return always.pressed(session, decision, event, by)
    if decision.kind == "approval" and event.choice in (APPROVE, REJECT):
        status: DecisionStatus = "approved" if event.choice == APPROVE else "rejected"
        return [Claim(decision_id=decision.id, status=status, by=by)]
    if _option(decision, event) is not None:
        return [Claim(decision_id=decision.id, status="answered", by=by)]
    return [Notify(text=UNKNOWN_BUTTON, alert=True)]


def _option(decision: Decision, event: InboundAction) -> str | None:
    choice = event.choice
    if decision.kind == "question" and choice.isdigit() and int(choice) < len(decision.options):
        return decision.options[int(choice)]
    return None


def _claimed(
    session: Session, pending: Decision | None, claimed: Claimed, policy: Policy
) -> list[Effect]:
    # what a private run's decision became is its owner's alone, like the prompt was
    owner = privately.owner_of_session(session)
    return privately.kept_to(owner, _claimed_effects(session, pending, claimed, policy))


def _claimed_effects(
    session: Session, pending: Decision | None, claimed: Claimed, policy: Policy
) -> list[Effect]:
    received, decided = claimed.received, claimed.decided
    event = received.event
    entry_id = received.entry_id
    edit = _edit_decided(decided)
    if claimed.status == "expired":
        current = pending is not None and session.decision_id == pending.id and session.state
        settle: list[Effect] = [Settle(abandon=EXPIRED_NOTE)] if current else []
        return [*edit, *settle, Notify(text=stale_click_text(pending, policy.now), alert=True)]
    if claimed.status == "cancelled":
        return [*edit, Settle(abandon=CANCELLED_NOTE), _say(CANCELLED)]
    if isinstance(event, InboundMessage):
        # Under the conversation's lock nobody else decides meanwhile: go on either way.
        if claimed.status == "answered":
            answer = Resolution(entry_id=entry_id, answer=event.text)
            return [*edit, Resume(resolution=answer, attachments=_has_files(received))]
        if verdict(event.text) is not None and claimed.status in ("approved", "rejected"):
            # A typed yes or no decides as a press would, and is said back the same way.
            said = [Send(message=decided_line(decided), slot="decided")] if decided else []
            typed = Resolution(entry_id=entry_id, approved=claimed.status == "approved")
            return [*edit, *said, Resume(resolution=typed)]
        feedback = Send(message=OutboundMessage(text=FEEDBACK_NOTE), slot="feedback")
        rejection = Resolution(entry_id=entry_id, approved=False, reason=event.text)
        return [*edit, feedback, Resume(resolution=rejection)]
    if decided is None:  # decided a moment ago by someone else
        return [Notify(text=stale_click_text(claimed.current, policy.now), alert=True)]
    if claimed.status == "answered":
        option = _option(decided, event) or ""
        resolution = Resolution(entry_id=entry_id, answer=option)
        return [Notify(text=option), *_edit_decided(decided, option), Resume(resolution=resolution)]
    approved = claimed.status == "approved"
    if approved and event.choice == ALWAYS and event.actor.user_id == decided.requester_id:
        everywhere = policy.standing_everywhere
        return [*edit, *always.granted(session, decided, entry_id, policy.addressing, everywhere)]
    toast = "Approved" if approved else "Rejected"
    resolution = Resolution(entry_id=entry_id, approved=approved)
    return [Notify(text=toast), *edit, Resume(resolution=resolution)]


# --- what a run came to -------------------------------------------------------------------


def _ran(ran: Ran, policy: Policy) -> list[Effect]:
    event = ran.received.event
    counted: list[Effect] = []
    if isinstance(event, InboundMessage) and event.kind in OWN_KINDS:
        # Parley's own run is counted by outcome, and posts one message, its answer (no
        # after-run note: nobody there just spoke to Parley)
        if OwnRan in policy.brought:
            counted = [OwnRan(outcome=type(ran.outcome).__name__.lower())]
        ran = replace(ran, note=None)
    # a run private to one person says everything to them alone (privately.py)
    owner = privately.owner_of_outcome(ran.outcome)
    return [*counted, *privately.kept_to(owner, _outcome(ran, policy))]


def _outcome(ran: Ran, policy: Policy) -> list[Effect]:
    outcome, received = ran.outcome, ran.received
    standing = always.ran(outcome, policy.addressing)
    if isinstance(outcome, Finished | Failed):
        note: list[Effect] = [Send(message=ran.note, slot="note")] if ran.note else []
        answer = outcome_message(outcome)
        if ran.header:  # the line that says which schedule or trigger the answer comes from
            answer = replace(answer, text=f"{ran.header}\n\n{answer.text}")
        return [Settle(), *standing, Answer(message=answer), *note]
    decision_id = decision_id_for(received.event.conversation.id, received.entry_id)
    context = outcome.state.context
    asking = isinstance(outcome, AwaitingAnswer)
    # a tool's question, or a Connect link (bound to the requester's account): theirs alone
    own = bool(asking and (q := outcome.state.pending_question) and (q.call or q.link_url))
    owner = privately.owner_of_outcome(outcome)
    effects: list[Effect] = [
        *standing,
        Open(
            decision_id=decision_id,
            kind="question" if asking else "approval",
            requester_id=context.user_id,
            requester_name=context.user_name,
            text=outcome_message(outcome).text,
            options=tuple(outcome.options) if isinstance(outcome, AwaitingAnswer) else (),
            is_direct=context.is_direct,
            requester_only=own or owner is not None,  # approvers never saw a private one
            private_to=owner,
        ),
    ]
    if isinstance(outcome, AwaitingApproval) and outcome.plan.uncertain:
        steps = "\n".join(f"• {step.description}" for step in outcome.plan.uncertain)
        effects.append(_say(UNCERTAIN_TEXT.format(steps=steps), slot="uncertain"))
    if isinstance(outcome, AwaitingApproval):  # long values in full, just above the prompt
        for number, whole in enumerate(continuations(outcome)):
            effects.append(Send(message=whole, slot=f"argument-{number}"))
    prompt = outcome_message(outcome, decision_id)
    if not context.is_direct and owner is None:  # in a group: to those who may decide
        prompt = replace(prompt, audience=deciders(context.user_id, policy.approvers, own))
    effects.append(connect_privately.prompt(outcome, prompt, policy.addressing))
    return effects


# --- who may decide, and small helpers ----------------------------------------------------


def may_decide(event: InboundMessage | InboundAction, decision: Decision, policy: Policy) -> bool:
    """The requester always; in a shared chat, configured approvers (ids or groups) too,
    but not for a tool's own question (`requester_only`)."""
    actor = event.actor
    requester, direct = decision.requester_id, decision.is_direct or decision.requester_only
    return may_act(actor.user_id, actor.groups, requester, direct, policy.approvers)


def _live(session: Session, pending: Decision | None, policy: Policy) -> Decision | None:
    """The session's decision if it still waits for someone."""
    if pending is None or pending.id != session.decision_id or pending.status != "pending":
        return None
    return None if pending.expired(policy.now) else pending


def _has_files(received: Received) -> bool:
    return isinstance(received.event, InboundMessage) and bool(received.event.attachments)


def _by(event: InboundMessage | InboundAction) -> str:
    return mention(event.conversation.platform, event.actor.user_id, event.actor.name)


def _requester(decision: Decision) -> str:
    platform = decision.conversation_id.split(":", 1)[0]
    return mention(platform, decision.requester_id, decision.requester_name)


def _say(text: str, slot: str = "reply") -> Send:
    return Send(message=OutboundMessage(text=text), slot=slot)


def _said_to(template: str, decision: Decision) -> Send:
    who = _requester(decision)
    message = OutboundMessage(text=template.format(who=who), allowed_mentions=frozenset({who}))
    return Send(message=message)


def _edit_decided(decision: Decision | None, answer: str | None = None) -> list[Effect]:
    """The decided prompt, buttons gone, showing what became of it (if it was posted)."""
    if decision is None or decision.message_id is None:
        return []
    message = decided_message(decision)
    if answer is not None:
        message = replace(message, text=f"{message.text}: {answer}")
    return [Edit(message_id=decision.message_id, message=message, slot=f"decided:{decision.id}")]
