"""Telegram updates as neutral events: who wrote, where, what, and whether it was for Parley.

Bots, service messages and automatic forwards from a linked channel are no events at all; in
groups a message counts only when addressed (a mention in the text or a caption, a reply to
Parley, one of its commands). Everything addressed becomes an event, and what the adapter
saw is its `kind`: `non_text` (an unreadable attachment alone), `bare_mention`, `too_long`
(cut to the limit), `not_allowed` (a sender off the allowlist). The conversation engine
decides what to say about each; this module says nothing.

A sender off the allowlist (and not paired: the adapter asks, `TelegramAdapter`) is handed
over once per conversation and pairing code: repeats seen in this process are dropped here, so one person flooding cannot fill the inbox.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from telegram import CallbackQuery, Message, Update, User
from telegram.constants import ChatType, MessageAttachmentType, MessageEntityType

from adapters.base import (
    Actor,
    ConversationKey,
    InboundAction,
    InboundKind,
    InboundMessage,
    MessageRef,
)
from adapters.telegram.buttons import origin_of, parse_callback_data
from adapters.telegram.files import attachments_of, forward_author, replied_to

log = logging.getLogger(__name__)

COMMANDS = {
    "start": "Say hello and see what I can do",
    "help": "How to use me",
    "memories": "What I remember about you",
    "forget": "Forget one memory (/forget 2) or all (/forget all)",
    "correct": "Put a memory right (/correct 2 new words)",
    "why": "The memories behind my last answer",
    "instructions": "What I was asked to do in every conversation here",
    "cancel": "Stop what I'm doing",
    "status": "What I'm doing and your usage today",
    "schedules": "This chat's schedules: pause, resume, delete",
    "connections": "Your connected accounts and standing approvals",
}
# What a person sends; a message with none of these (and no text) is a service message.
# A payment receipt is an attachment to PTB but a service message to a person.
CONTENT = tuple(
    kind for kind in MessageAttachmentType if kind != MessageAttachmentType.SUCCESSFUL_PAYMENT
) + ("checklist",)
MAX_TEXT = 4096  # characters: the longest text message Telegram lets anyone send
REFUSALS_KEPT = 10_000  # (conversation, sender, code) already handed over as not_allowed


def update_event(update_id: int) -> str:
    """An update's event id (the inbox takes each once; a retried update has the same)."""
    return f"tg:{update_id}"


@dataclass(kw_only=True)
class TelegramInbound:
    allowed_users: tuple[str, ...] = ()
    open_access: bool = False  # without an allowlist: everyone (open), or nobody unpaired
    max_message_chars: int = MAX_TEXT
    max_file_bytes: int = 20 * 1024 * 1024
    me: User | None = None  # Parley itself, once getMe answered
    _allowed_ids: set[str] = field(default_factory=set, init=False)
    _allowed_names: set[str] = field(default_factory=set, init=False)
    _refused: set[tuple[str, str, str]] = field(default_factory=set, init=False)
    refusals_dropped: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        for entry in self.allowed_users:
            if entry.startswith("@"):
                self._allowed_names.add(entry[1:].lower())
            else:
                self._allowed_ids.add(entry)

    def allowed(self, sender_id: str, username: str | None) -> bool:
        if not self._allowed_ids and not self._allowed_names:
            return self.open_access
        name = (username or "").lower()
        return sender_id in self._allowed_ids or (bool(name) and name in self._allowed_names)

    def refused_before(self, event: InboundMessage) -> bool:
        """Whether this sender was already handed over as not allowed in this conversation."""
        if (event.conversation.id, event.actor.user_id, event.args) not in self._refused:
            return False
        self.refusals_dropped += 1
        return True

    def refusal_stored(self, event: InboundMessage) -> None:
        if len(self._refused) >= REFUSALS_KEPT:
            self._refused.clear()
        self._refused.add((event.conversation.id, event.actor.user_id, event.args))
        log.info(
            "Telegram sender %s is not on the allowlist; further messages from them in %s "
            "are dropped",
            event.actor.user_id,
            event.conversation.id,
        )

    def message(
        self, update_id: int, message: Message, *, paired: bool = False
    ) -> InboundMessage | None:
        """The event a message makes, or None if it is not for Parley."""
        sender = _sender(message)
        if sender is None:
            return None  # bots, Telegram's own forwards from a linked channel
        actor, username = sender
        text = message.text or message.caption or ""
        if not text and not any(message[kind] for kind in CONTENT):
            return None  # a service message: a pin, members joining, a new timer or wallpaper
        direct = message.chat.type == ChatType.PRIVATE
        forwarded_from = forward_author(message)
        # a forwarded "/forget all" is someone else's text, not the sender's command
        command, args = (
            (None, "") if forwarded_from else self.command(message.text or "", direct=direct)
        )
        if not (direct or command is not None or self._addressed(message)):
            return None
        event = InboundMessage(
            event_id=update_event(update_id),
            conversation=conversation_of(message),
            actor=actor,
            text="",
            is_direct=direct,
            message_id=str(message.message_id),
        )
        if not paired and not self.allowed(actor.user_id, username):
            return replace(event, kind="not_allowed")
        files = attachments_of(message, self.max_file_bytes)
        quoted, quoted_files = replied_to(message, self.me, self.max_file_bytes)
        kind: InboundKind = "text"
        if command is None:
            text = self._strip_mention(text).strip()
            if not text and not files and not quoted_files and not quoted:
                kind = "non_text" if message.text is None else "bare_mention"
        length = len(text)
        if length > self.max_message_chars:
            kind, text = "too_long", text[: self.max_message_chars]
        return replace(
            event,
            text=text if command is None or kind == "too_long" else args,
            command=command,
            args=args,
            attachments=(*files, *quoted_files),
            context=tuple(quoted),
            kind=kind,
            length=length,
            forwarded_from=forwarded_from,
        )

    def action(
        self, update_id: int, query: CallbackQuery, *, paired: bool = False
    ) -> InboundAction | InboundMessage | None:
        """A button press; a not_allowed message for a presser off the allowlist; None if the
        button is not one of Parley's (any more)."""
        parsed = parse_callback_data(query.data or "")
        message = query.message
        if parsed is None or not isinstance(message, Message):
            return None
        conversation = conversation_of(message)
        actor = _actor(query.from_user)
        direct = message.chat.type == ChatType.PRIVATE
        if not paired and not self.allowed(actor.user_id, query.from_user.username):
            return InboundMessage(
                event_id=update_event(update_id),
                conversation=conversation,
                actor=actor,
                text="",
                is_direct=direct,
                kind="not_allowed",
            )
        decision_id, choice = parsed
        pressed = MessageRef(conversation=conversation, message_id=str(message.message_id))
        origin = origin_of(query.data or "")
        if origin is not None and direct:  # a prompt re-offered privately: the group decides
            chat, topic = origin
            conversation = ConversationKey(platform="telegram", chat_id=chat, thread_id=topic)
            direct = False
        return InboundAction(
            event_id=update_event(update_id),
            conversation=conversation,
            actor=actor,
            decision_id=decision_id,
            choice=choice,
            message=pressed,
            callback_id=query.id,
            is_direct=direct,
        )

    def stopped(self, update_id: int, raw: object) -> InboundMessage | None:
        """The stop button on a streamed draft (Bot API 10.3 `stopped_message_generation`,
        which python-telegram-bot 22.8 does not parse: it arrives in the update's api_kwargs).
        Drafts exist only in private chats, so whoever stopped is that chat's person."""
        if not isinstance(raw, dict) or not isinstance(raw.get("chat"), dict):
            return None
        chat = raw["chat"]
        chat_id, thread = chat.get("id"), raw.get("message_thread_id")
        if not isinstance(chat_id, int) or chat.get("type", "private") != "private":
            return None
        username = chat.get("username") if isinstance(chat.get("username"), str) else None
        name = " ".join(str(chat.get(k)) for k in ("first_name", "last_name") if chat.get(k))
        event = InboundMessage(
            event_id=update_event(update_id),
            conversation=ConversationKey(
                platform="telegram",
                chat_id=str(chat_id),
                thread_id=str(thread) if isinstance(thread, int) and thread else None,
            ),
            actor=Actor(platform="telegram", user_id=str(chat_id), name=name or str(chat_id)),
            text="stop",
            is_direct=True,
            command="cancel",
        )
        return event if self.allowed(str(chat_id), username) else None

    def command(self, text: str, *, direct: bool) -> tuple[str | None, str]:
        """The command a message gives Parley, if any, and its arguments.

        In a group a bare `/cmd` may be meant for any bot there: only Parley's own commands
        count, and `/cmd@OtherBot` never does.
        """
        if not text.startswith("/"):
            return None, text
        head, _, args = text[1:].partition(" ")
        name, _, target = head.partition("@")
        if target and self.me is not None and target.lower() != (self.me.username or "").lower():
            return None, text  # a command for another bot
        if not name or (not direct and not target and name.lower() not in COMMANDS):
            return None, text
        return name.lower(), args.strip()

    def _addressed(self, message: Message) -> bool:
        """A reply to Parley, or a mention of it in the text or a media caption."""
        me = self.me
        if me is None:
            return False
        reply = message.reply_to_message
        if reply is not None and reply.from_user is not None and reply.from_user.id == me.id:
            return True
        handle = f"@{(me.username or '').lower()}"
        for entities, parse in (
            (message.entities, message.parse_entity),
            (message.caption_entities, message.parse_caption_entity),
        ):
            for entity in entities or ():
                if entity.type == MessageEntityType.MENTION:
                    try:
                        mentioned = parse(entity)
                    except (UnicodeError, ValueError, IndexError, RuntimeError):
                        continue  # offsets that fit no text
                    if mentioned.lower() == handle:
                        return True
                user = entity.user
                if (
                    entity.type == MessageEntityType.TEXT_MENTION
                    and user is not None
                    and user.id == me.id
                ):
                    return True
        return False

    def _strip_mention(self, text: str) -> str:
        if self.me is None or not self.me.username:
            return text
        mention = f"@{self.me.username}"
        index = text.lower().find(mention.lower())
        return text if index < 0 else (text[:index] + text[index + len(mention) :])


def parse_update(data: object, bot: object) -> Update | None:
    """A Bot API update from decoded JSON, or None if it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
        return None
    _number_ephemeral(data)
    try:
        update = Update.de_json(data, bot)  # type: ignore[arg-type]
    except Exception:  # mistyped or too deeply nested: RecursionError is one too
        return None
    return update if isinstance(update, Update) else None


def _number_ephemeral(data: dict[str, object]) -> None:
    """A press on an ephemeral prompt (Bot API 10.2) names its message by
    `ephemeral_message_id`; should the message come without a `message_id`, PTB 22.8 could
    not parse the update at all and the press would be lost, so it gets that number."""
    query = data.get("callback_query")
    message = query.get("message") if isinstance(query, dict) else None
    if isinstance(message, dict) and "message_id" not in message:
        ephemeral = message.get("ephemeral_message_id")
        if isinstance(ephemeral, int):
            message["message_id"] = ephemeral


def conversation_of(message: Message) -> ConversationKey:
    """A forum topic, or a topic of a private chat (Bot API 9.3), is a conversation of its own;
    elsewhere a message_thread_id only names a reply chain."""
    private = message.chat.type == ChatType.PRIVATE
    topic = message.is_topic_message or (private and message.message_thread_id)
    thread = message.message_thread_id if topic else None
    return ConversationKey(
        platform="telegram",
        chat_id=str(message.chat.id),
        thread_id=str(thread) if thread is not None else None,
    )


def _actor(user: User) -> Actor:
    name = user.full_name or (f"@{user.username}" if user.username else str(user.id))
    return Actor(platform="telegram", user_id=str(user.id), name=name)


def _sender(message: Message) -> tuple[Actor, str | None] | None:
    """Who wrote a message (and their @username), or None for bots and automatic forwards.

    An anonymous group admin, or someone writing as a channel, comes with `sender_chat`
    (and a placeholder bot in `from`): the person is that chat.
    """
    chat = message.sender_chat
    if chat is not None:
        if message.is_automatic_forward:
            return None
        name = chat.title or (f"@{chat.username}" if chat.username else str(chat.id))
        return Actor(platform="telegram", user_id=str(chat.id), name=name), chat.username
    user = message.from_user
    if user is None or user.is_bot:
        return None
    return _actor(user), user.username
