"""An in-memory chat adapter that records what the runtime asked it to show.

It stands in for a platform adapter (our own code, whose SDK side is tested against fake
platform servers in tests/adapters), so runtime tests can read the conversation directly.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from adapters.base import (
    PLAIN,
    Actor,
    Addressing,
    ConversationKey,
    InboundAction,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
    Undeliverable,
)
from adapters.platform import ChatAdapter
from agent.protocols import RunContext

_ids = itertools.count(1)


@dataclass
class Posted:
    ref: MessageRef
    message: OutboundMessage
    edits: list[OutboundMessage] = field(default_factory=list)

    @property
    def current(self) -> OutboundMessage:
        return self.edits[-1] if self.edits else self.message


@dataclass
class RecordingAdapter(ChatAdapter):
    platform: Platform = "telegram"
    addressing: Addressing = PLAIN  # a field, so a test can declare another
    posted: list[Posted] = field(default_factory=list)
    notices: list[tuple[InboundAction, str, bool]] = field(default_factory=list)
    progress_log: list[tuple[str, str | None]] = field(default_factory=list)
    send_delay: float = 0.0
    # chats the platform refuses for good, as Telegram refuses a private chat with someone
    # who never started one with the bot
    refused: set[str] = field(default_factory=set)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        if self.send_delay:
            await asyncio.sleep(self.send_delay)
        if conversation.chat_id in self.refused:
            raise Undeliverable("Forbidden: bot can't initiate conversation with a user")
        ref = MessageRef(conversation=conversation, message_id=str(next(_ids)))
        self.posted.append(Posted(ref=ref, message=message))
        return ref

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        for posted in self.posted:
            if posted.ref == ref:
                posted.edits.append(message)
                return
        raise AssertionError(f"edit of an unknown message {ref}")

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        self.notices.append((action, text, alert))

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        self.progress_log.append((conversation.id, status))

    def in_conversation(self, conversation: ConversationKey) -> list[Posted]:
        return [p for p in self.posted if p.ref.conversation == conversation]

    def prompt(self, conversation: ConversationKey) -> Posted:
        """The last message with buttons in `conversation`."""
        return [p for p in self.in_conversation(conversation) if p.message.buttons][-1]

    def texts(self, conversation: ConversationKey | None = None) -> list[str]:
        posts = self.posted if conversation is None else self.in_conversation(conversation)
        return [p.message.text for p in posts]


_events = itertools.count(1)


def dm(user: str = "42", name: str = "Ana", platform: Platform = "telegram") -> ConversationKey:
    return ConversationKey(platform=platform, chat_id=user)


def message(
    conversation: ConversationKey,
    text: str,
    *,
    user: str = "42",
    name: str = "Ana",
    direct: bool = True,
    command: str | None = None,
    args: str = "",
) -> InboundMessage:
    return InboundMessage(
        event_id=f"ev-{next(_events)}",
        conversation=conversation,
        # a member of the workspace the conversation is in, as Slack names them (user_team)
        actor=Actor(
            platform=conversation.platform, user_id=user, name=name, team_id=conversation.team_id
        ),
        text=text,
        is_direct=direct,
        command=command,
        args=args,
    )


def click(
    conversation: ConversationKey,
    posted: Posted,
    choice: str,
    *,
    user: str = "42",
    name: str = "Ana",
    groups: tuple[str, ...] = (),
) -> InboundAction:
    assert posted.message.decision_id is not None, "that message has no buttons"
    return InboundAction(
        event_id=f"ev-{next(_events)}",
        conversation=conversation,
        actor=Actor(platform=conversation.platform, user_id=user, name=name, groups=groups),
        decision_id=posted.message.decision_id,
        choice=choice,
        message=posted.ref,
        callback_id=f"cb-{next(_events)}",
    )


def press(
    posted: Posted, label: str, *, user: str = "42", name: str = "Ana", groups: tuple[str, ...] = ()
) -> InboundAction:
    """A press of the button labelled `label` on `posted`, where it was posted."""
    labels = [b.label for b in posted.message.buttons]
    choice = posted.message.buttons[labels.index(label)].value
    return click(posted.ref.conversation, posted, choice, user=user, name=name, groups=groups)


def run_in(chat: ConversationKey, user: str, name: str = "", *, direct: bool = False) -> RunContext:
    """A run for `user` in `chat` (a shared one unless `direct`), as the runtime makes it."""
    return RunContext(
        conversation_id=chat.id,
        platform=chat.platform,
        user_id=user,
        chat_id=chat.chat_id,
        team_id=chat.team_id,
        is_direct=direct,
        user_name=name,
    )
