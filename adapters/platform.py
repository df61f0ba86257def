"""What the service asks of a chat platform: `ChatAdapter`, the adapter itself, and the
`LiveMessage` it may hand out to show an answer while it is written."""

from __future__ import annotations

from typing import Protocol

from adapters.base import (
    PLAIN,
    Addressing,
    ConversationKey,
    InboundAction,
    MessageRef,
    OutboundMessage,
    Platform,
    SessionState,
)


class ChatAdapter(Protocol):
    """A platform, as the service uses it. Adapters subclass it: the capabilities after the
    required methods have defaults (a platform without them), so the service calls them
    without asking first, and an adapter overrides only what its platform can do."""

    platform: Platform
    # seconds a run works before progress shows (None: the service's default) and how often
    # it is shown again while the run goes on (None: once; Telegram's "typing" fades)
    progress_delay: float | None = None
    progress_refresh: float | None = None
    # memories shared with the team are the person's organisation's where the platform names
    # one (Slack Enterprise Grid, PARLEY_SLACK_TEAM_MEMORIES); else their team's
    org_team: bool = False

    async def start(self) -> None:
        """Begin receiving events (polling, sockets, webhook registration)."""

    async def stop(self) -> None: ...

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        """Post a message (split if long); the ref names the part that carries the buttons.

        Raises DeliveryError (DeliveryFailed or Undeliverable) when the platform does not take it."""

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        """Replace a message, e.g. to show a decision and remove its buttons (DeliveryError)."""

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        """Answer a button press to the presser alone; called exactly once per action.

        Telegram answers the callback query (an alert box when `alert`, else a toast);
        Slack posts an ephemeral message when `alert` and otherwise stays quiet, since the
        edited message already shows the decision.
        """

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        """Show that work is under way ("typing", a status line); None clears it."""

    async def acting_in(self, conversation: ConversationKey) -> None:
        """The calls that follow in this task are for `conversation` (Slack installed in
        several workspaces sends them with that workspace's token); nothing by default."""
        return None

    # --- capabilities, declared with the default of a platform that lacks them ---------------

    @property
    def addressing(self) -> Addressing:
        """How people write commands and mention Parley here (plain `/help` by default)."""
        return PLAIN

    @property
    def greeting(self) -> str:
        """Said once to a person who opens their conversation with Parley ("": nothing)."""
        return ""

    def live(
        self,
        conversation: ConversationKey,
        *,
        user_id: str,
        team_id: str | None,
        is_direct: bool,
        allowed_mentions: frozenset[str] = frozenset(),
        reply_to: str | None = None,
    ) -> LiveMessage | None:
        """A message that shows the answer while it is written, or None where the platform
        cannot stream here; it may ping only `allowed_mentions` and replies to `reply_to`
        where the platform shows that."""
        return None

    async def user_timezone(self, user_id: str) -> str | None:
        """The person's IANA time zone, when the platform tells it."""
        return None

    async def user_name(self, user_id: str) -> str:
        """The person's display name, where events do not carry it ("": unknown)."""
        return ""

    async def user_left(self, user_id: str) -> bool:
        """Whether the platform says the person is gone (deactivated), not merely away."""
        return False

    async def member_of(self, conversation: ConversationKey, user_id: str) -> bool | None:
        """Whether the person (and Parley) are still in the chat, as the platform says now:
        None when it cannot tell (an error, a member list too long to read). A platform
        without members to ask (the console) says True."""
        return True

    async def session_status(
        self,
        conversation: ConversationKey,
        message_id: str | None,
        state: SessionState,
        title: str | None = None,
        initiator: str | None = None,
    ) -> None:
        """How the run stands, where the platform shows agent sessions; only a nicety.
        `message_id`: the message a new run began with (None: the session goes on);
        `initiator`: the user who asked."""
        return None


class LiveMessage(Protocol):
    """An answer shown while it is written; `finish` delivers the whole of it exactly once.

    `show`, `reset` and `discard` never raise: a platform that refuses to stream only means
    the answer arrives whole at `finish`, which falls back to an ordinary message. Live
    messages subclass it; the capabilities after the required methods have defaults.
    """

    @property
    def message_id(self) -> str | None:
        """The platform message being grown, once there is one (drafts have none)."""

    @property
    def min_interval(self) -> float:
        """Least seconds between two updates that the platform allows here."""

    async def show(self, text: str) -> None:
        """Show the answer so far (the whole text, not a delta)."""

    async def reset(self, status: str | None) -> None:
        """What was shown was not the answer; show `status` instead where the platform can."""

    async def discard(self) -> None:
        """Take back whatever was shown."""

    async def finish(self, message: OutboundMessage) -> MessageRef:
        """Deliver the final message: finish or replace the growing one, or post it."""

    # --- capabilities, declared with the default of a platform that lacks them ---------------

    @property
    def shows_steps(self) -> bool:
        """Whether it shows the run's tool steps and an approved plan (Slack's task updates).
        Without it the stream neither calls `plan` and `task` nor reads or records anything
        for them."""
        return False

    async def plan(self, title: str, steps: list[tuple[str, str, str]]) -> None:
        """A plan being carried out: its title and steps (id, title, status); never raises."""
        return None

    async def task(self, task_id: str, title: str, status: str) -> None:
        """A tool step of the run, pending, in_progress, complete or error; never raises."""
        return None
