"""Telegram on python-telegram-bot's `Bot`: updates in, neutral events out, and back.

Receiving is long polling (`start_polling`, which the service runs only on the replica that
holds the polling lease) or a webhook route on the shared aiohttp server. At the edge it
checks the webhook secret and the allowlist, ignores bots and service messages, keeps quiet
in groups unless addressed (a mention in the text or a caption, a reply to Parley, one of
its commands), and answers messages with nothing to read, bare mentions and over-long
messages itself; everything else goes to the handler.

Nothing is confirmed to Telegram before the handler has stored it: polling moves its offset
past an update only once it is handed over (or dropped as unparseable), and the webhook
answers 2xx only then. While the handler cannot store (`HandoverFailed`), polling backs off
and offers the same update again; the webhook answers 503 so Telegram redelivers. Polling
fetches raw JSON and parses each update alone, so one update python-telegram-bot cannot read
is skipped with a warning instead of failing its whole batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_random_exponential

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
from telegram.constants import (
    ChatAction,
    ChatType,
    MessageAttachmentType,
    MessageEntityType,
    ParseMode,
)
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest, RequestData
from telegram.request._requestparameter import RequestParameter

from adapters.base import (
    Actor,
    Attachment,
    ContextMessage,
    ConversationKey,
    DeliveryFailed,
    HandoverFailed,
    Inbound,
    InboundAction,
    InboundHandler,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
)
from adapters.telegram_files import attachments_of, download, replied_to
from adapters.telegram_format import MESSAGE_LIMIT, split_html
from adapters.telegram_http import AiohttpRequest
from adapters.telegram_stream import TelegramLive, seconds
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
HELP_LINE = "Tell me what you need in the same message, e.g. “@{name} what's on today?” — /help lists my commands."
HELP_LINE_DIRECT = "Tell me what you need, or send /help to see my commands."
# What a person sends; a message with none of these (and no text) is a service message.
# A payment receipt is an attachment to PTB but a service message to a person.
CONTENT = tuple(
    kind for kind in MessageAttachmentType if kind != MessageAttachmentType.SUCCESSFUL_PAYMENT
) + ("checklist",)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
CALLBACK_PREFIX = "d"
MAX_RETRY_AFTER = 60.0
ALLOWED_UPDATES = ["message", "callback_query"]


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
    handover_timeout: float = 5.0  # seconds the handler may take to store one update
    backoff: float = 0.2  # first pause (s) after a failed poll or handover; grows, jittered
    backoff_max: float = 10.0
    # Polling counts as stuck when no getUpdates succeeded for 2 * poll_timeout + this.
    stale_margin: float = 15.0
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
    _refused: set[str] = field(default_factory=set, init=False)
    _poller: asyncio.Task[None] | None = field(default=None, init=False)
    _poll_request: HTTPXRequest = field(init=False)
    _offset: int | None = field(default=None, init=False)
    # Wall-clock time of the last successful getUpdates (or of the start of polling).
    last_poll: float | None = field(default=None, init=False)
    _trouble: str | None = field(default=None, init=False)
    _allowed_ids: set[str] = field(default_factory=set, init=False)
    _allowed_names: set[str] = field(default_factory=set, init=False)
    # "typing" fades after 5 s, so a run that still works shows it again this often
    progress_refresh: float = field(default=4.0, init=False)

    def __post_init__(self) -> None:
        root = self.config.api_url.rstrip("/")
        self._sender = AiohttpRequest(connection_pool_size=32)
        self._poll_request = HTTPXRequest(read_timeout=self.config.poll_timeout + 10)
        self.bot = Bot(
            self.config.token,
            base_url=f"{root}/bot",
            base_file_url=f"{root}/file/bot",
            request=self._sender,
            get_updates_request=self._poll_request,
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
                allowed_updates=ALLOWED_UPDATES,
            )

    async def start_polling(self) -> None:
        if self._poller is None:
            self.last_poll = time.time()
            self._poller = asyncio.create_task(self._supervise())

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

    @property
    def polling(self) -> bool:
        return self._poller is not None and not self._poller.done()

    def polling_health(self) -> tuple[bool, str]:
        """Whether polling is alive and recent (True when this replica is not polling)."""
        if self._poller is None:
            return True, "not polling"
        if self._poller.done():
            return False, "polling task ended"
        age = time.time() - (self.last_poll or 0.0)
        limit = 2 * self.config.poll_timeout + self.config.stale_margin
        if age > limit:
            return False, f"no getUpdates for {age:.0f} s ({self._trouble or 'stuck'})"
        return True, f"last getUpdates {age:.1f} s ago"

    async def _supervise(self) -> None:
        """Poll; should polling ever end on an error, say so and start it again."""
        delay = self.config.backoff
        while True:
            started = time.time()
            try:
                await self.initialize()
                await self._call(self.bot.delete_webhook)
                await self._poll_forever()
            except asyncio.CancelledError:
                raise
            except Exception:
                if (self.last_poll or 0.0) > started:
                    delay = self.config.backoff  # it had worked: start the backoff afresh
                log.exception("Telegram polling stopped unexpectedly; restarting in %.1f s", delay)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.config.backoff_max)

    async def _poll_forever(self) -> None:
        """Fetch updates and confirm each (the next offset) only once it is handed over."""
        while True:
            for raw in await self._fetch():
                update_id = raw.get("update_id") if isinstance(raw, dict) else None
                if not isinstance(update_id, int):
                    log.warning("skipping a Telegram update without an update_id")
                    continue
                await self._take(update_id, raw)
                self._offset = update_id + 1

    async def _fetch(self) -> list[Any]:
        """One long poll, as raw JSON, retried with backoff while Telegram is unreachable."""
        parameters = {
            "offset": self._offset,
            "timeout": self.config.poll_timeout,
            "allowed_updates": ALLOWED_UPDATES,
        }
        data = RequestData(
            [RequestParameter.from_input(k, v) for k, v in parameters.items() if v is not None]
        )
        async for attempt in self._retrying(lambda exc: isinstance(exc, TelegramError)):
            with attempt:
                result = await self._poll_request.post(f"{self.bot.base_url}/getUpdates", data)
        self.last_poll = time.time()
        self._recovered()
        return result if isinstance(result, list) else []

    async def _take(self, update_id: int, raw: dict[str, Any]) -> None:
        """Hand one update over, waiting out a handler that cannot store it for now."""
        update = self.parse_update(raw)
        if update is None:
            log.warning("skipping Telegram update %d: it cannot be parsed", update_id)
            return
        try:
            async for attempt in self._retrying(_transient):
                with attempt:
                    await self.process(update)
        except Exception as exc:
            log.warning("dropping Telegram update %d: %s", update_id, type(exc).__name__)
            return
        self._recovered()

    def _retrying(self, retry_on: Callable[[BaseException], bool]) -> AsyncRetrying:
        """Retries for as long as it takes, backing off (jittered); waits out RetryAfter."""
        backoff = wait_random_exponential(
            multiplier=self.config.backoff, max=self.config.backoff_max
        )

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, RetryAfter):
                return min(seconds(exc.retry_after), MAX_RETRY_AFTER)
            return float(backoff(state))

        return AsyncRetrying(
            retry=retry_if_exception(retry_on),
            wait=wait,
            before_sleep=self._degraded,
            reraise=True,
        )

    def _degraded(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        trouble = type(exc).__name__
        if self._trouble is None:
            log.warning("Telegram updates are waiting (%s); retrying with backoff", trouble)
        self._trouble = trouble

    def _recovered(self) -> None:
        if self._trouble is not None:
            log.info("Telegram updates flow again (after %s)", self._trouble)
            self._trouble = None

    async def _hand_over(self, event: Inbound) -> None:
        assert self.handler is not None
        try:
            async with asyncio.timeout(self.config.handover_timeout):
                await self.handler(event)
        except TimeoutError as exc:
            raise HandoverFailed("the handler did not answer in time") from exc

    def webhook_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/telegram/webhook", self._webhook

    async def _webhook(self, request: web.Request) -> web.Response:
        """200 once the update is stored; 503 (redeliver) if it cannot be yet; 400 if never."""
        secret = self.config.webhook_secret or ""
        given = request.headers.get(SECRET_HEADER, "")
        if not secret or not hmac.compare_digest(given.encode(), secret.encode()):
            return web.json_response({"ok": False, "error": "forbidden"}, status=403)
        try:
            data = json.loads(await request.read())
        except (ValueError, RecursionError):
            data = None
        update_id = data.get("update_id") if isinstance(data, dict) else None
        update = self.parse_update(data)
        if update is None:
            log.warning("refusing Telegram update %s: it cannot be parsed", _named(update_id))
            return web.json_response({"ok": False, "error": "malformed update"}, status=400)
        try:
            await self.initialize()
            await self.process(update)
        except Exception as exc:
            if _transient(exc):
                self._refusing(exc)
                return web.json_response({"ok": False, "error": "try again"}, status=503)
            log.warning("refusing Telegram update %d: %s", update.update_id, type(exc).__name__)
            return web.json_response({"ok": False, "error": "unprocessable update"}, status=400)
        self._recovered()
        return web.json_response({"ok": True})

    def _refusing(self, exc: BaseException) -> None:
        if self._trouble is None:
            log.warning("Telegram updates are refused for now (%s)", type(exc).__name__)
        self._trouble = type(exc).__name__

    # --- platform events in -----------------------------------------------------------------

    def parse_update(self, data: object) -> Update | None:
        """A Bot API update from decoded JSON, or None if it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            return None
        try:
            update = Update.de_json(data, self.bot)
        except Exception:  # mistyped or too deeply nested: RecursionError is one too
            return None
        return update if isinstance(update, Update) else None

    async def process(self, update: Update) -> None:
        """Translate one update and hand it over (or answer it at the edge)."""
        if update.callback_query is not None:
            await self._on_callback(update.update_id, update.callback_query)
        elif update.message is not None:
            await self._on_message(update.update_id, update.message)

    def allowed(self, user: User) -> bool:
        return self._allowed(str(user.id), user.username)

    def _allowed(self, sender_id: str, username: str | None) -> bool:
        if not self._allowed_ids and not self._allowed_names:
            return True
        name = (username or "").lower()
        return sender_id in self._allowed_ids or (bool(name) and name in self._allowed_names)

    async def _on_message(self, update_id: int, message: Message) -> None:
        sender = _sender(message)
        if sender is None:
            return  # bots, Telegram's own forwards from a linked channel
        actor, username = sender
        text = message.text or message.caption or ""
        if not text and not any(message[kind] for kind in CONTENT):
            return  # a service message: a pin, members joining, a new timer or wallpaper
        direct = message.chat.type == ChatType.PRIVATE
        command, args = self._command(message.text or "", direct=direct)
        addressed = direct or command is not None or self._addressed(message)
        if not addressed:
            return
        if not self._allowed(actor.user_id, username):
            if actor.user_id not in self._refused:
                self._refused.add(actor.user_id)
                await self._reply(message, NOT_ALLOWED)
            return
        files = attachments_of(message, self.config.max_file_bytes)
        quoted, quoted_files = replied_to(message, self.me, self.config.max_file_bytes)
        if command is None:
            text = self._strip_mention(text).strip()
            if not text and not files and not quoted_files and not quoted:
                # Nothing to read: an unreadable attachment alone, or a bare mention of Parley.
                await self._reply(
                    message, TEXT_ONLY if message.text is None else self._help(direct)
                )
                return
        if len(text) > self.config.max_message_chars:
            await self._reply(message, too_long(len(text), self.config.max_message_chars))
            return
        if self.handler is None:
            return
        await self._hand_over(
            InboundMessage(
                event_id=f"tg:{update_id}",
                conversation=self._conversation(message),
                actor=actor,
                text=text if command is None else args,
                is_direct=direct,
                command=command,
                args=args,
                message_id=str(message.message_id),
                attachments=(*files, *quoted_files),
                context=tuple(quoted),
            )
        )

    def _help(self, direct: bool) -> str:
        if direct or self.me is None or not self.me.username:
            return HELP_LINE_DIRECT
        return HELP_LINE.format(name=self.me.username)

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
        await self._hand_over(
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

    def _command(self, text: str, *, direct: bool) -> tuple[str | None, str]:
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
        with _delivery():
            for index, part in enumerate(parts):
                last = index == len(parts) - 1
                sent = await self._call(
                    self.bot.send_message,
                    chat_id=int(conversation.chat_id),
                    text=part,
                    parse_mode=ParseMode.HTML,
                    message_thread_id=(
                        int(conversation.thread_id) if conversation.thread_id else None
                    ),
                    reply_markup=markup if last else None,
                    disable_web_page_preview=True,
                )
        assert sent is not None
        return MessageRef(conversation=conversation, message_id=str(sent.message_id))

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        text = split_html(message.text or "…", MESSAGE_LIMIT)[0]
        try:
            with _delivery():
                await self._call(
                    self.bot.edit_message_text,
                    chat_id=int(ref.conversation.chat_id),
                    message_id=int(ref.message_id),
                    text=text,
                    parse_mode=ParseMode.HTML,
                    reply_markup=_keyboard(message),
                    disable_web_page_preview=True,
                )
        except DeliveryFailed as exc:
            if "not modified" not in exc.reason.lower():
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
        self, conversation: ConversationKey, before: str, after: str | None = None
    ) -> list[ContextMessage]:
        return []  # bots cannot read a chat's history; replies bring their quoted message

    def live(
        self, conversation: ConversationKey, *, user_id: str, team_id: str | None, is_direct: bool
    ) -> TelegramLive:
        """Drafts in a private chat, one growing message elsewhere."""
        return TelegramLive(
            adapter=self,
            conversation=conversation,
            draft=is_direct and int(conversation.chat_id) > 0,
        )

    async def call(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return await self._call(method, *args, **kwargs)

    async def _call(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Call the Bot API, waiting out 429 RetryAfter a few times."""
        for attempt in range(self.config.retries + 1):
            try:
                return await method(*args, **kwargs)
            except RetryAfter as exc:
                if attempt == self.config.retries:
                    raise
                wait = min(seconds(exc.retry_after), MAX_RETRY_AFTER)
                log.warning("Telegram asked us to wait %.1f s", wait)
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")


@contextlib.contextmanager
def _delivery() -> Iterator[None]:
    """Bot API errors as DeliveryFailed: a refusal (400, 403, bad token) is permanent."""
    try:
        yield
    except TelegramError as exc:
        permanent = isinstance(exc, BadRequest | Forbidden | InvalidToken)
        raise DeliveryFailed(exc.message, permanent=permanent) from exc


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


def _transient(exc: BaseException) -> bool:
    """Worth trying again later: the store or Telegram is unreachable, not the update bad."""
    if isinstance(exc, HandoverFailed | RetryAfter):
        return True
    return isinstance(exc, NetworkError) and not isinstance(exc, BadRequest)


def _named(update_id: object) -> str:
    return str(update_id) if isinstance(update_id, int) else "without an update_id"
