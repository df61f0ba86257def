"""The neutral events that cross between a chat platform and the rest of Parley.

An adapter turns platform events into `InboundMessage` / `InboundAction` and hands them to
an `InboundHandler`; it renders an `OutboundMessage` (Markdown text plus optional buttons)
on its platform. Adapters know nothing of the agent, Redis or each other.

Sending and editing fail with one small error tree:

    DeliveryError            the platform did not take a send or an edit
    ├── DeliveryFailed       transient: the platform or the network may recover
    └── Undeliverable        permanent: the chat is gone, the bot blocked, the message refused

A handler that cannot store an event for now raises `HandoverFailed`: the adapter then keeps
the event unconfirmed on its platform (no offset, no ack, a non-2xx answer) so it comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Platform = Literal["slack", "telegram", "console"]
InboundKind = Literal[
    "text",
    "non_text",
    "bare_mention",
    "too_long",
    "not_allowed",
    "pairing",
    "scheduled",
    "triggered",
    "opened",
    "connected",
]
# How a run stands, for a platform that shows agent sessions (Slack): "done" and "stopped"
# leave the conversation open for the person's next message; "ended" closes it (the person
# cancelled what waited for them, or it expired).
SessionState = Literal["working", "waiting", "done", "stopped", "ended"]


@dataclass(frozen=True, kw_only=True)
class ConversationKey:
    """Where a conversation lives. Every reply goes back to exactly this place."""

    platform: Platform
    chat_id: str  # Slack channel id, Telegram chat id
    thread_id: str | None = None  # Slack thread_ts, Telegram forum topic id
    team_id: str | None = None  # Slack workspace id

    @property
    def id(self) -> str:
        """A stable string id, used in Redis keys."""
        return ":".join([self.platform, self.team_id or "-", self.chat_id, self.thread_id or "-"])

    @classmethod
    def parse(cls, value: str) -> ConversationKey:
        platform, team, chat, thread = value.split(":", 3)
        assert platform in ("slack", "telegram", "console")
        return cls(
            platform=platform,  # type: ignore[arg-type]
            chat_id=chat,
            thread_id=None if thread == "-" else thread,
            team_id=None if team == "-" else team,
        )


@dataclass(frozen=True, kw_only=True)
class Actor:
    """The person behind an event."""

    platform: Platform
    user_id: str
    name: str = ""
    team_id: str | None = None
    enterprise_id: str | None = None  # Slack Enterprise Grid organisation, when there is one
    # Slack user-group ids (or other platform groups) the person belongs to, when known.
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class MessageRef:
    """A message Parley posted, so it can be edited later."""

    conversation: ConversationKey
    message_id: str  # Slack ts, Telegram message_id


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """A file on a message. The gateway records only where it is; a worker downloads it."""

    ref: str  # Telegram file_id, Slack url_private
    name: str = ""
    mime_type: str = ""
    size: int | None = None  # bytes, as the platform declares it
    quoted: bool = False  # on the message this one replies to
    # Spoken media (a voice note, an audio file, a video note or clip): transcribed, and the
    # transcript becomes the message text.
    speech: bool = False
    duration: float | None = None  # seconds, as the platform declares it


@dataclass(frozen=True, kw_only=True)
class ContextMessage:
    """An earlier message of the conversation that Parley did not receive as an objective."""

    author: str
    text: str
    from_bot: bool = False  # Parley's own message
    at: float | None = None  # epoch seconds, when known


@dataclass(frozen=True, kw_only=True)
class InboundMessage:
    """Someone wrote to Parley (or used one of its commands)."""

    event_id: str  # platform-unique, for deduplication
    conversation: ConversationKey
    actor: Actor
    text: str
    is_direct: bool  # a one-to-one chat, as opposed to a shared channel or group
    command: str | None = None  # "help", "memories", "forget", "cancel", "status", "start"
    args: str = ""
    message_id: str | None = None
    # False for a Slack thread reply that did not mention Parley: it counts only if the
    # thread is already a conversation with Parley.
    mentioned: bool = True
    attachments: tuple[Attachment, ...] = ()
    context: tuple[ContextMessage, ...] = ()  # e.g. the Telegram message replied to
    # What the adapter saw, so the conversation engine (not the adapter) decides what to say:
    # "non_text" nothing readable (e.g. a sticker or an unsupported file alone),
    # "bare_mention" Parley addressed with nothing else, "too_long" over the length limit
    # (`text` then holds the first max_message_chars characters, `length` the full length),
    # "not_allowed" the sender is not on the allowlist, "pairing" not paired either (`args`:
    # their pairing code, "" where none is given: outside a private chat). Parley's own objectives: "scheduled"
    # (a schedule's slot, `args` "late" when it starts late) and "triggered" (a webhook).
    # "opened": the person opened their conversation with Parley (Slack's Messages tab)
    # without writing. "connected": the person finished connecting an account (`args` names
    # the question the run waits on).
    kind: InboundKind = "text"
    length: int = 0
    # Where the platform takes a private answer to this event (Slack's slash-command
    # `response_url`): it reaches the person even in a channel Parley is not in.
    reply_url: str | None = None
    # A forwarded message: who wrote it (a name, a chat's title, or "someone" when hidden).
    # Its text is their words, not the sender's.
    forwarded_from: str | None = None


@dataclass(frozen=True, kw_only=True)
class InboundAction:
    """Someone pressed one of Parley's buttons."""

    event_id: str
    conversation: ConversationKey
    actor: Actor
    decision_id: str
    choice: str  # "approve", "reject", or the index of an option as a string
    message: MessageRef | None = None  # the message that carries the buttons
    callback_id: str | None = None  # Telegram callback query id, answered with notify()
    is_direct: bool = False
    # Where the platform takes a reply to this press (Slack's `response_url`): the only way
    # to replace the ephemeral message it was made on.
    reply_url: str | None = None


class DeliveryError(Exception):
    """The platform did not take a send or an edit."""

    permanent: bool = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DeliveryFailed(DeliveryError):
    """A transient failure: the platform or the network may recover (like PTB's NetworkError)."""


class Undeliverable(DeliveryError):
    """Trying again cannot help: the chat is gone, the bot was blocked, the message refused
    (like PTB's Forbidden / BadRequest)."""

    permanent = True


Inbound = InboundMessage | InboundAction
InboundHandler = Callable[[Inbound], Awaitable[object]]


def is_stop(event: Inbound) -> bool:
    """Whether `event` asks to stop what runs in its conversation: `/cancel`, or the stop a
    platform offers, which its adapter hands over as that command. The one reading of it:
    the worker, the engine and the followed tasks' rule all ask here. Words after it that
    run too long do not make it less of a stop; someone not let in never stops anything."""
    return (
        isinstance(event, InboundMessage)
        and event.kind in ("text", "too_long")
        and (event.command or "").lower() == "cancel"
    )


class HandoverFailed(Exception):
    """The handler could not store the event durably; it is safe to offer it again later."""


async def hand_over(handler: InboundHandler, event: Inbound, within: float) -> None:
    """Give an event to the handler; one that takes over `within` seconds has not stored it."""
    try:
        async with asyncio.timeout(within):
            await handler(event)
    except TimeoutError as exc:
        raise HandoverFailed("the handler did not answer in time") from exc


@dataclass(frozen=True, kw_only=True)
class Button:
    label: str
    value: str  # what comes back as InboundAction.choice
    style: Literal["primary", "danger"] | None = None
    url: str | None = None  # a link button: opens the URL, nothing comes back


@dataclass(frozen=True, kw_only=True)
class ProposedPlan:
    """The plan an approval prompt asks about, for a platform that shows plans (Slack's plan
    stream). The prompt's text still says exactly what will run; this only draws it."""

    title: str
    steps: tuple[tuple[str, str], ...]  # (tool, what the model says it does, defanged)
    requester: str  # user id: who the plan is shown to as it is drawn (Slack's recipient)
    team: str | None = None  # the requester's team


@dataclass(frozen=True, kw_only=True)
class Addressing:
    """How people address Parley on a platform, as its adapter declares it; every help and
    confirmation text is written with it."""

    command_prefix: str = "/"  # "/parley " on Slack: `/parley memories`
    code: bool = False  # commands shown as code (Slack), not plain (Telegram links them)
    mention: str | None = None  # how to mention Parley in a shared chat, once known
    threads: bool = False  # a mention opens a thread whose replies reach Parley
    # a shared chat can show a message to one member alone, surely (Slack's ephemeral
    # messages); else what one person alone may see goes to their private chat
    ephemeral: bool = False

    def command(self, name: str) -> str:
        """Command `name` as typed: `/parley help`, `/help`."""
        return f"{self.command_prefix}{name}"

    def shown(self, name: str) -> str:
        """Command `name` inside a sentence."""
        return f"`{self.command(name)}`" if self.code else self.command(name)


PLAIN = Addressing()  # `/help`, no mention: a platform that declares nothing else


@dataclass(frozen=True, kw_only=True)
class OutboundMessage:
    """Markdown text, optionally with buttons that point at a pending decision."""

    text: str
    buttons: tuple[Button, ...] = ()
    decision_id: str | None = None
    # Show only to this user id where the platform can (Slack ephemeral, Telegram: their own
    # chat with Parley); else post normally.
    private_to: str | None = None
    # For a private message: what the conversation is told instead when the platform cannot
    # reach the person privately (Telegram: they never opened a chat with Parley). It must
    # hold nothing of the private text.
    unreachable: str | None = None
    # A prompt meant for these user ids alone, the requester first: shown only to them where
    # the platform can (Telegram's ephemeral messages in groups), else posted as usual.
    audience: tuple[str, ...] = ()
    reply_url: str | None = None  # for a private answer: the event's `reply_url`
    reply_to: str | None = None  # the message this answers, where the platform shows it
    # Platform mention tokens (Slack `<@U…>`, `<!here>`) that may ping people: the ones the
    # requester typed or Parley names itself. Any other mention in the text pings nobody.
    allowed_mentions: frozenset[str] = frozenset()
    plan: ProposedPlan | None = None  # an approval prompt's plan, where the platform draws one


class DownloadError(Exception):
    """A file could not be fetched from the platform."""


class FileTooLarge(DownloadError):
    def __init__(self, size: int | None, limit: int) -> None:
        super().__init__(f"file of {size} bytes over the limit of {limit}")
        self.size = size
        self.limit = limit


@runtime_checkable
class ConversationSource(Protocol):
    """What a worker may fetch from a platform beyond the event: files and thread history."""

    async def download(self, attachment: Attachment, limit: int) -> bytes:
        """The file's bytes; FileTooLarge past `limit` bytes, DownloadError on failure."""
        ...

    async def thread_history(
        self, conversation: ConversationKey, before: str, after: str | None = None
    ) -> list[ContextMessage]:
        """The thread's messages older than message `before` (and newer than message `after`,
        when given), oldest first ([] if none)."""
        ...


class ChannelRefused(Exception):
    """A channel cannot be read for this person; the message says why, for the model."""


class HistoryLimited(ChannelRefused):
    """The platform rate-limits history reads for now (Slack's reduced limits for apps outside
    its Marketplace); `retry_after`: seconds until a read may be tried again."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(
            "The platform limits how often Parley may read message history; "
            f"it can be read again in about {max(1, round(retry_after))} seconds."
        )


@dataclass(frozen=True, kw_only=True)
class ChannelInfo:
    """A channel as the platform lists it: enough to decide who may see what it holds."""

    id: str
    members: frozenset[str]
    complete: bool  # False: it has more members than were listed
    with_parley: bool  # Parley is a member
    teams: frozenset[str] = frozenset()  # the workspaces that host or share it (Slack)
    enterprises: frozenset[str] = frozenset()  # the organisation Slack names for it, if any
    allowed: bool = True  # inside the platform's allowlists (teams, channels)


@runtime_checkable
class ChannelSource(Protocol):
    async def channel_info(self, channel: str) -> ChannelInfo:
        """The channel named by id, mention or #name; ChannelRefused when unknown."""
        ...

    async def channel_history(self, channel_id: str, oldest: float) -> list[ContextMessage]:
        """The channel's messages since `oldest` (epoch seconds), oldest first; ChannelRefused
        when the platform will not give them. Who may see them is the caller's question."""
        ...
