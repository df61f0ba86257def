"""What the conversation engine asks for, and what it is told back.

`decide` (engine.py) returns a list of effects; the executor carries them out in order. A few
effects need the world's answer before the rules can go on: `Admit` (may this person send
another message now?), `Claim` (was the decision still pending when it was claimed?), `Run`
and `Resume` (what did the run come to?). The executor answers each with a follow-up event —
`Admitted`, `Claimed`, `Ran` — and calls `decide` again with it::

    Received ─▶ Admit ─▶ Admitted ─▶ Run ────────────────▶ Ran ─▶ Answer | Open + Prompt
            └▶ Claim ─▶ Claimed ─▶ Edit, Notify, Resume ─┘

A spoken message is transcribed once admitted (`Transcribe` ─▶ `Transcribed`), and then goes
on as if its transcript had been typed.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import Inbound, OutboundMessage
from agent.messages import ContentBlock
from agent.outcomes import Outcome
from bot.runtime.decisions import Decision, Kind
from bot.runtime.decisions import Status as DecisionStatus
from bot.runtime.sessions import Resolution

# --- events -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Received:
    """An inbox entry: the event as the adapter handed it over."""

    entry_id: str
    event: Inbound


@dataclass(frozen=True, kw_only=True)
class Admitted:
    """The answer to `Admit`: None, or the sentence that refuses the message."""

    received: Received
    refusal: str | None = None


@dataclass(frozen=True, kw_only=True)
class Claimed:
    """The answer to `Claim`: the decision as decided, or None if it was no longer pending
    (then `current` is the decision as it is now)."""

    received: Received
    status: DecisionStatus
    decided: Decision | None
    current: Decision | None = None


@dataclass(frozen=True, kw_only=True)
class Ran:
    """The answer to `Run` / `Resume`: what the run came to, and the after-run note."""

    received: Received
    outcome: Outcome
    note: OutboundMessage | None = None
    header: str = ""  # the answer's first line (the `Run`'s)


@dataclass(frozen=True, kw_only=True)
class OwnChecked:
    """The answer to `CheckOwn`: whether Parley's own objective runs (`go`), what is said
    in the conversation either way, and what the run reads first and answers under."""

    received: Received
    go: bool
    say: str | None = None
    header: str = ""
    preface: tuple[ContentBlock, ...] = ()
    standing: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Transcribed:
    """The answer to `Transcribe`: `received` now holds the message with its transcript as
    text, or `refusal` is the one sentence that says why there is none."""

    received: Received
    transcript: str = ""
    refusal: str | None = None
    note: str | None = None  # nothing was heard but the message goes on (its caption)


@dataclass(frozen=True, kw_only=True)
class NotACode:
    """The answer to `ConfirmConnection` when the person has no sign-in waiting for a code:
    the message is just a message."""

    received: Received


@dataclass(frozen=True, kw_only=True)
class TasksCancelled:
    """The answer to `CancelTasks`: how many of the conversation's followed tasks stopped."""

    received: Received
    count: int


Event = Received | Admitted | Claimed | Ran | Transcribed | NotACode | TasksCancelled | OwnChecked

# --- effects ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Send:
    """Post a message through the outbox under the key of its `slot`."""

    message: OutboundMessage
    slot: str = "reply"
    # Keyed by the conversation instead of the entry: said once there (within the outbox's
    # memory), however many entries ask for it.
    per_conversation: bool = False


@dataclass(frozen=True, kw_only=True)
class Edit:
    """Replace a message Parley posted (a decided prompt loses its buttons)."""

    message_id: str
    message: OutboundMessage
    slot: str


@dataclass(frozen=True, kw_only=True)
class Notify:
    """Answer the button press being handled, to the presser alone."""

    text: str
    alert: bool = False


@dataclass(frozen=True, kw_only=True)
class Admit:
    """Check the sender's rate and budget; answered with `Admitted`."""


@dataclass(frozen=True, kw_only=True)
class Transcribe:
    """Turn the message's voice note or audio into its text; answered with `Transcribed`."""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """Move a pending decision to `status` once (a compare-and-set); answered with `Claimed`."""

    decision_id: str
    status: DecisionStatus
    by: str


@dataclass(frozen=True, kw_only=True)
class Settle:
    """The conversation goes idle; an unfinished run's open calls are closed with `abandon`."""

    abandon: str | None = None


@dataclass(frozen=True, kw_only=True)
class EndSession:
    """Nothing runs or waits here: the platform's agent session leaves "processing" (Slack:
    active), so a stop pressed when nothing runs does not leave it showing work."""


@dataclass(frozen=True, kw_only=True)
class Run:
    """Start a run on the message (thread context and files gathered first); `Ran` follows.

    Parley's own objective (`own`, checked by `CheckOwn`) gathers nothing: the model reads
    `preface` before it, `standing` are the approvals it runs with, and its answer comes
    under `header`."""

    own: bool = False
    header: str = ""
    preface: tuple[ContentBlock, ...] = ()
    standing: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Resume:
    """Continue the suspended run with `resolution`; `Ran` follows. With `attachments`, the
    message's files go along with the answer."""

    resolution: Resolution
    attachments: bool = False


@dataclass(frozen=True, kw_only=True)
class CancelTasks:
    """A stop also stops the conversation's followed MCP tasks, those of whoever the person
    may act for; `TasksCancelled` follows."""

    received: Received


@dataclass(frozen=True, kw_only=True)
class GrantStanding:
    """Store the requester's "Always" for these tools (as the approval prompt showed them)."""

    tools: tuple[tuple[str, str], ...]  # (tool, digest of what it was shown to do)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """The run's final message: finishes the streamed answer, or is sent as the outcome."""

    message: OutboundMessage


@dataclass(frozen=True, kw_only=True)
class Open:
    """Store a new pending decision and make it the session's."""

    decision_id: str
    kind: Kind
    requester_id: str
    requester_name: str
    text: str
    options: tuple[str, ...] = ()
    is_direct: bool = False
    requester_only: bool = False  # a tool's own question: approvers do not answer for them
    private_to: str | None = None  # a private run's: its prompt is this person's alone


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """Post the open decision's prompt (with its buttons) and tie the decision to it.

    With `private_chat` (a user id) it goes to that person's private chat instead, and the
    conversation is told `sent`, or `unreachable` when the platform refuses the private
    message for good (the person never opened a chat with Parley)."""

    message: OutboundMessage
    private_chat: str | None = None
    sent: OutboundMessage | None = None
    unreachable: OutboundMessage | None = None


@dataclass(frozen=True, kw_only=True)
class Command:
    """A command answered from memory or usage (/memories, /forget, /status)."""


@dataclass(frozen=True, kw_only=True)
class Follow:
    """Take the thread's later replies as addressed to Parley, though no run started yet."""


@dataclass(frozen=True, kw_only=True)
class Forget:
    """A Forget button under a list of memories was pressed."""


@dataclass(frozen=True, kw_only=True)
class ListSchedules:
    """/schedules: the conversation's schedules, with their buttons."""


@dataclass(frozen=True, kw_only=True)
class ScheduleButton:
    """A Pause / Resume / Delete button under a list of schedules was pressed."""


@dataclass(frozen=True, kw_only=True)
class ListConnections:
    """/connections: the person's connected accounts, privately, with Disconnect buttons."""


@dataclass(frozen=True, kw_only=True)
class ConnectionButton:
    """A Disconnect button under /connections was pressed."""


@dataclass(frozen=True, kw_only=True)
class ConfirmConnection:
    """A message that is only a code: it may confirm a sign-in of the sender's
    (bot/features/connections/held.py); `NotACode` when none of theirs waits."""

    code: str


@dataclass(frozen=True, kw_only=True)
class CheckOwn:
    """Parley's own objective (a schedule's slot, a webhook trigger) is checked before it
    runs: is its schedule still there and its owner still allowed; `OwnChecked` follows."""


@dataclass(frozen=True, kw_only=True)
class OwnRan:
    """Parley's own run came to `outcome` (counted by kind: finished, failed, awaiting…)."""

    outcome: str


# Carried out by the features that bring them (seam.py), not by the executor itself.
FeatureEffect = (
    ListSchedules
    | ScheduleButton
    | ListConnections
    | ConnectionButton
    | ConfirmConnection
    | CancelTasks
    | GrantStanding
    | CheckOwn
    | OwnRan
    | Transcribe
)
Effect = (
    (
        Send
        | Edit
        | Notify
        | Admit
        | Claim
        | Settle
        | Run
        | Resume
        | Answer
        | Open
        | Prompt
        | Command
    )
    | Forget
    | Follow
    | EndSession
    | FeatureEffect
)
