"""Telegram on python-telegram-bot's `Bot`: updates in, neutral events out, and back.

Receiving is long polling (`start_polling`, which the service runs only on the replica that
holds the polling lease) or a webhook route on the shared aiohttp server. At the edge it
checks the webhook secret and the allowlist, keeps quiet in groups unless addressed, and
answers non-text and over-long messages itself; everything else goes to the handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

# Opt in to PTB's timedelta durations (RetryAfter.retry_after) instead of its deprecated ints.
os.environ.setdefault("PTB_TIMEDELTA", "1")

from telegram import (  # noqa: E402
    Bot,
    BotCommand,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
    User,
)
from telegram.constants import ChatAction, ChatType, MessageEntityType, ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from adapters.base import (
    Actor,
    Attachment,
    ContextMessage,
    ConversationKey,
    InboundAction,
    InboundHandler,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
)
from adapters.telegram_files import attachments_of, caption_mentions, download, replied_to
from adapters.telegram_format import MESSAGE_LIMIT, split_html
from adapters.telegram_http import AiohttpRequest
from adapters.text import too_long

log = logging.getLogger(__name__)

T = TypeVar("T")

COMMANDS = {
    "start": "Say hello and see what I can do",
    "help": "How to use me",
    "memories": "What I remember about you",
    "forget": "Forget one memory (/forget 2) or all (/forget all)",
    "cancel": "Stop what I'm doing",
    "status": "What I'm doing and your usage today",
}
NOT_ALLOWED = "Sorry — I'm a private assistant and can't help you here."
TEXT_ONLY = (
    "I can read text, photos and files (images, PDFs, text files) — not this kind of message."
)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
CALLBACK_PREFIX = "d"
MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True, kw_only=True)
class TelegramConfig:
    token: str
    api_url: str = "https://api.telegram.org"
    mode: str = "polling"
    webhook_url: str | None = None
    webhook_secret: str | None = None
    allowed_users: tuple[str, ...] = ()
    max_message_chars: int = 4000
    poll_timeout: int = 30  # seconds of each long poll
    retries: int = 3  # attempts after a 429 RetryAfter
    max_file_bytes: int = 20 * 1024 * 1024  # photos: the largest size within this


def callback_data(decision_id: str, choice: str) -> str:
    data = f"{CALLBACK_PREFIX}:{decision_id}:{choice}"
    if len(data.encode()) > 64:
        raise ValueError(f"callback data over Telegram's 64 bytes: {data!r}")
    return data


def parse_callback_data(data: str) -> tuple[str, str] | None:
    prefix, _, rest = data.partition(":")
    decision_id, _, choice = rest.rpartition(":")
    if prefix != CALLBACK_PREFIX or not decision_id or not choice:
        return None
    return decision_id, choice


@dataclass(kw_only=True)
class TelegramAdapter:
    config: TelegramConfig
    handler: InboundHandler | None = None
    platform: Platform = "telegram"
    bot: Bot = field(init=False)
    _sender: AiohttpRequest = field(init=False)
    me: User | None = field(default=None, init=False)
    _refused: set[int] = field(default_factory=set, init=False)
    _poller: asyncio.Task[None] | None = field(default=None, init=False)
    _offset: int | None = field(default=None, init=False)
    _allowed_ids: set[str] = field(default_factory=set, init=False)
    _allowed_names: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        root = self.config.api_url.rstrip("/")
        self._sender = AiohttpRequest(connection_pool_size=32)
        self.bot = Bot(
            self.config.token,
            base_url=f"{root}/bot",
            base_file_url=f"{root}/file/bot",
            request=self._sender,
            get_updates_request=HTTPXRequest(read_timeout=self.config.poll_timeout + 10),
        )
        for entry in self.config.allowed_users:
            if entry.startswith("@"):
                self._allowed_names.add(entry[1:].lower())
            else:
                self._allowed_ids.add(entry)

    # --- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        if self.me is None:
            await self.bot.initialize()
            self.me = await self._call(self.bot.get_me)

    async def start(self) -> None:
        """Register commands and, in webhook mode, the webhook (polling starts separately)."""
        await self.initialize()
        await self._call(
            self.bot.set_my_commands, [BotCommand(name, text) for name, text in COMMANDS.items()]
        )
        if self.config.mode == "webhook":
            if not self.config.webhook_url:
                raise ValueError("webhook mode needs PARLEY_TELEGRAM_WEBHOOK_URL")
            await self._call(
                self.bot.set_webhook,
                url=self.config.webhook_url,
                secret_token=self.config.webhook_secret,
                allowed_updates=["message", "callback_query"],
            )

    async def start_polling(self) -> None:
        await self.initialize()
        if self._poller is None:
            await self._call(self.bot.delete_webhook)
            self._poller = asyncio.create_task(self._poll_forever())

    async def stop_polling(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller

    async def stop(self) -> None:
        await self.stop_polling()
        with contextlib.suppress(TelegramError, RuntimeError):
            await self.bot.shutdown()
        await self._sender.shutdown()  # opened on first send even when the bot never initialized

    async def _poll_forever(self) -> None:
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=self._offset,
                    timeout=self.config.poll_timeout,
                    allowed_updates=["message", "callback_query"],
                )
            except RetryAfter as exc:
                await asyncio.sleep(min(_seconds(exc.retry_after), MAX_RETRY_AFTER))
                continue
            except TelegramError as exc:
                log.warning("getUpdates failed (%s); retrying", type(exc).__name__)
                await asyncio.sleep(1)
                continue
            for update in updates:
                self._offset = update.update_id + 1
                try:
                    await self.process(update)
                except Exception:
                    log.exception("update %s could not be handled", update.update_id)

    def webhook_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/telegram/webhook", self._webhook

    async def _webhook(self, request: web.Request) -> web.Response:
        secret = self.config.webhook_secret or ""
        given = request.headers.get(SECRET_HEADER, "")
        if not secret or not hmac.compare_digest(given.encode(), secret.encode()):
            return web.json_response({"ok": False, "error": "forbidden"}, status=403)
        try:
            data = json.loads(await request.read())
        except ValueError:
            data = None
        await self.initialize()
        update = self.parse_update(data)
        if update is None:
            return web.json_response({"ok": False, "error": "malformed update"}, status=400)
        try:
            await self.process(update)
        except Exception:
            log.exception("update %s could not be handled", update.update_id)
            return web.json_response({"ok": False}, status=500)
        return web.json_response({"ok": True})

    # --- platform events in -----------------------------------------------------------------

    def parse_update(self, data: object) -> Update | None:
        """A Bot API update from decoded JSON, or None if it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            return None
        try:
            return Update.de_json(data, self.bot)
        except Exception:
            return None

    async def process(self, update: Update) -> None:
        """Translate one update and hand it over (or answer it at the edge)."""
        if update.callback_query is not None:
            await self._on_callback(update.update_id, update.callback_query)
        elif update.message is not None:
            await self._on_message(update.update_id, update.message)

    def allowed(self, user: User) -> bool:
        if not self._allowed_ids and not self._allowed_names:
            return True
        name = (user.username or "").lower()
        return str(user.id) in self._allowed_ids or (bool(name) and name in self._allowed_names)

    async def _on_message(self, update_id: int, message: Message) -> None:
        user = message.from_user
        if user is None or user.is_bot:
            return
        direct = message.chat.type == ChatType.PRIVATE
        text = message.text or message.caption or ""
        command, args = self._command(text)
        addressed = direct or command is not None or self._addressed(message)
        addressed = addressed or caption_mentions(message, self.me)
        if not addressed:
            return
        if not self.allowed(user):
            if user.id not in self._refused:
                self._refused.add(user.id)
                await self._reply(message, NOT_ALLOWED)
            return
        files = attachments_of(message, self.config.max_file_bytes)
        quoted, quoted_files = replied_to(message, self.me, self.config.max_file_bytes)
        if message.text is None and not files:
            await self._reply(message, TEXT_ONLY)
            return
        if command is None:
            text = self._strip_mention(text).strip()
        if len(text) > self.config.max_message_chars:
            await self._reply(message, too_long(len(text), self.config.max_message_chars))
            return
        if self.handler is None:
            return
        await self.handler(
            InboundMessage(
                event_id=f"tg:{update_id}",
                conversation=self._conversation(message),
                actor=_actor(user),
                text=text if command is None else args,
                is_direct=direct,
                command=command,
                args=args,
                message_id=str(message.message_id),
                attachments=(*files, *quoted_files),
                context=tuple(quoted),
            )
        )

    async def _on_callback(self, update_id: int, query: CallbackQuery) -> None:
        parsed = parse_callback_data(query.data or "")
        message = query.message
        if parsed is None or not isinstance(message, Message):
            await self._call(query.answer, "This button is no longer active.", show_alert=True)
            return
        if not self.allowed(query.from_user):
            await self._call(query.answer, NOT_ALLOWED, show_alert=True)
            return
        if self.handler is None:
            return
        decision_id, choice = parsed
        conversation = self._conversation(message)
        await self.handler(
            InboundAction(
                event_id=f"tg:{update_id}",
                conversation=conversation,
                actor=_actor(query.from_user),
                decision_id=decision_id,
                choice=choice,
                message=MessageRef(conversation=conversation, message_id=str(message.message_id)),
                callback_id=query.id,
                is_direct=message.chat.type == ChatType.PRIVATE,
            )
        )

    def _command(self, text: str) -> tuple[str | None, str]:
        if not text.startswith("/"):
            return None, text
        head, _, args = text[1:].partition(" ")
        name, _, target = head.partition("@")
        if target and self.me is not None and target.lower() != (self.me.username or "").lower():
            return None, text  # a command for another bot
        if not name:
            return None, text
        return name.lower(), args.strip()

    def _addressed(self, message: Message) -> bool:
        me = self.me
        if me is None:
            return False
        reply = message.reply_to_message
        if reply is not None and reply.from_user is not None and reply.from_user.id == me.id:
            return True
        for entity in message.entities or ():
            if entity.type == MessageEntityType.MENTION and message.text:
                try:
                    mentioned = message.parse_entity(entity)
                except (UnicodeError, ValueError, IndexError):  # offsets that fit no text
                    continue
                if mentioned.lower() == f"@{(me.username or '').lower()}":
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

    @staticmethod
    def _conversation(message: Message) -> ConversationKey:
        thread = message.message_thread_id if message.is_topic_message else None
        return ConversationKey(
            platform="telegram",
            chat_id=str(message.chat.id),
            thread_id=str(thread) if thread is not None else None,
        )

    async def _reply(self, message: Message, text: str) -> None:
        await self._call(
            self.bot.send_message,
            chat_id=message.chat.id,
            text=text,
            message_thread_id=message.message_thread_id if message.is_topic_message else None,
            reply_to_message_id=message.message_id,
        )

    # --- neutral events out -----------------------------------------------------------------

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        parts = split_html(message.text or "…", MESSAGE_LIMIT)
        markup = _keyboard(message)
        sent: Message | None = None
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            sent = await self._call(
                self.bot.send_message,
                chat_id=int(conversation.chat_id),
                text=part,
                parse_mode=ParseMode.HTML,
                message_thread_id=int(conversation.thread_id) if conversation.thread_id else None,
                reply_markup=markup if last else None,
                disable_web_page_preview=True,
            )
        assert sent is not None
        return MessageRef(conversation=conversation, message_id=str(sent.message_id))

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        text = split_html(message.text or "…", MESSAGE_LIMIT)[0]
        try:
            await self._call(
                self.bot.edit_message_text,
                chat_id=int(ref.conversation.chat_id),
                message_id=int(ref.message_id),
                text=text,
                parse_mode=ParseMode.HTML,
                reply_markup=_keyboard(message),
                disable_web_page_preview=True,
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        if action.callback_id is None:
            return
        try:
            await self._call(
                self.bot.answer_callback_query,
                action.callback_id,
                text=text[:200],
                show_alert=alert,
            )
        except BadRequest as exc:  # answered too late: Telegram forgets queries after a while
            log.info("callback query not answered: %s", exc)

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        if status is None:
            return  # Telegram clears "typing" by itself
        await self._call(
            self.bot.send_chat_action,
            chat_id=int(conversation.chat_id),
            action=ChatAction.TYPING,
            message_thread_id=int(conversation.thread_id) if conversation.thread_id else None,
        )

    async def download(self, attachment: Attachment, limit: int) -> bytes:
        return await download(self.bot, attachment, limit)

    async def thread_history(
        self, conversation: ConversationKey, before: str
    ) -> list[ContextMessage]:
        return []  # bots cannot read a chat's history; replies bring their quoted message

    async def _call(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Call the Bot API, waiting out 429 RetryAfter a few times."""
        for attempt in range(self.config.retries + 1):
            try:
                return await method(*args, **kwargs)
            except RetryAfter as exc:
                if attempt == self.config.retries:
                    raise
                wait = min(_seconds(exc.retry_after), MAX_RETRY_AFTER)
                log.warning("Telegram asked us to wait %.1f s", wait)
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")


def _keyboard(message: OutboundMessage) -> InlineKeyboardMarkup | None:
    if not message.buttons or message.decision_id is None:
        return None
    row = [
        InlineKeyboardButton(
            button.label, callback_data=callback_data(message.decision_id, button.value)
        )
        for button in message.buttons
    ]
    rows = [row] if len(row) <= 3 else [[button] for button in row]
    return InlineKeyboardMarkup(rows)


def _actor(user: User) -> Actor:
    name = user.full_name or (f"@{user.username}" if user.username else str(user.id))
    return Actor(platform="telegram", user_id=str(user.id), name=name)


def _seconds(value: Any) -> float:
    total = getattr(value, "total_seconds", None)
    return float(total()) if callable(total) else float(value)
