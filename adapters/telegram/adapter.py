"""Telegram on python-telegram-bot: updates in, neutral events out, and back.

Receiving is long polling (which the service runs only on the replica that holds the
polling lease) or a webhook route on the shared aiohttp server (`ingress.py`);
`inbound.py` turns each update into an event, which this adapter hands over. It
says nothing on its own: what a refusal, a sticker or an over-long message gets in reply is
the conversation engine's to decide.

Sending goes through PTB's `ExtBot` on an aiohttp transport (`http.py`), with PTB's
rate limiter; failures surface as the adapter error tree (`delivery.py`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from aiohttp import web

# Opt in to PTB's timedelta durations (RetryAfter.retry_after) instead of its deprecated ints.
os.environ.setdefault("PTB_TIMEDELTA", "1")

from telegram import (  # noqa: E402
    BotCommand,
    CallbackQuery,
    InlineKeyboardMarkup,
    Update,
    User,
)
from telegram.constants import ChatAction  # noqa: E402
from telegram.error import BadRequest, TelegramError  # noqa: E402
from telegram.ext import ExtBot  # noqa: E402
from telegram.request import HTTPXRequest  # noqa: E402

from adapters.base import (  # noqa: E402
    Addressing,
    Attachment,
    ContextMessage,
    ConversationKey,
    DeliveryError,
    Inbound,
    InboundAction,
    InboundHandler,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
    Undeliverable,
    hand_over,
)
from adapters.health import ApiHealth  # noqa: E402
from adapters.platform import ChatAdapter  # noqa: E402
from adapters.telegram.buttons import keyboard  # noqa: E402
from adapters.telegram.config import TelegramConfig  # noqa: E402
from adapters.telegram.delivery import RateLimiter, observed  # noqa: E402
from adapters.telegram.files import download  # noqa: E402
from adapters.telegram.format import MESSAGE_LIMIT, split_html  # noqa: E402
from adapters.telegram.http import AiohttpRequest  # noqa: E402
from adapters.telegram.inbound import COMMANDS, TelegramInbound  # noqa: E402
from adapters.telegram.inbound import parse_update as parse  # noqa: E402
from adapters.telegram.ingress import ALLOWED_UPDATES, MAX_RETRY_AFTER, TelegramIngress  # noqa: E402
from adapters.telegram.membership import member_of  # noqa: E402
from adapters.telegram.pairing import Pairing, paired_after_all, pairing_offer  # noqa: E402
from adapters.telegram.posting import edit_one, fitted, post, post_ephemeral  # noqa: E402
from adapters.telegram.refs import Placed, by_target, read, write  # noqa: E402
from adapters.telegram.reoffer import Reoffers  # noqa: E402
from adapters.telegram.stream import TelegramLive  # noqa: E402

log = logging.getLogger(__name__)


def _thread(conversation: ConversationKey) -> int | None:
    return int(conversation.thread_id) if conversation.thread_id else None


@dataclass(kw_only=True)
class TelegramAdapter(ChatAdapter):
    config: TelegramConfig
    handler: InboundHandler | None = None
    pairing: Pairing | None = None  # None: off the allowlist is simply not allowed
    platform: Platform = "telegram"
    bot: ExtBot[int] = field(init=False)
    inbound: TelegramInbound = field(init=False)
    ingress: TelegramIngress = field(init=False)
    api: ApiHealth = field(init=False)
    webhook_set: bool = field(default=False, init=False)
    _sender: AiohttpRequest = field(init=False)
    # "typing" fades after 5 s, so a run that still works shows it again this often
    progress_refresh: float = field(default=4.0, init=False)
    member_of = member_of  # getChatMember (membership.py)
    reoffers: Reoffers = field(init=False)

    def __post_init__(self) -> None:
        root = self.config.api_url.rstrip("/")
        self._sender = AiohttpRequest(connection_pool_size=32)
        poll_request = HTTPXRequest(read_timeout=self.config.poll_timeout + 10)
        self.bot = ExtBot(
            self.config.token,
            base_url=f"{root}/bot",
            base_file_url=f"{root}/file/bot",
            request=self._sender,
            get_updates_request=poll_request,
            rate_limiter=RateLimiter(max_retries=self.config.retries, max_wait=MAX_RETRY_AFTER),
        )
        self.inbound = TelegramInbound(
            allowed_users=self.config.allowed_users,
            open_access=self.config.open_access,
            max_message_chars=self.config.max_message_chars,
            max_file_bytes=self.config.max_file_bytes,
        )
        self.api = ApiHealth(platform="Telegram", degraded_after=self.config.degraded_after)
        self.ingress = TelegramIngress(
            config=self.config,
            bot=self.bot,
            api=self.api,
            initialize=self.initialize,
            process=self.process,
            request=poll_request,
        )
        self.reoffers = Reoffers(after=self.config.reoffer_after, bot=self.bot, api=self.api)

    @property
    def me(self) -> User | None:
        return self.inbound.me

    @property
    def handle(self) -> str | None:
        """Parley's @name in Telegram, for sentences that show how to address it."""
        return self.me.username if self.me is not None and self.me.username else None

    @property
    def addressing(self) -> Addressing:
        """`/memories`; in a group, `@parley_bot …` (once getMe told the name)."""
        return Addressing(mention=f"@{self.handle}" if self.handle else None)

    def html(self, text: str, allowed: Iterable[str]) -> list[str]:
        """The message's parts as Telegram HTML: only `allowed` mentions ping (naming Parley
        itself pings nobody)."""
        own = [f"@{self.handle}"] if self.handle else []
        return split_html(text or "…", MESSAGE_LIMIT, [*allowed, *own])

    # --- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        if self.inbound.me is None:
            with observed(self.api):
                await self.bot.initialize()
            self.inbound.me = self.bot.bot

    async def start(self) -> None:
        """Register commands and, in webhook mode, the webhook (polling starts separately)."""
        await self.initialize()
        commands = [BotCommand(name, text) for name, text in COMMANDS.items()]
        with observed(self.api):
            await self.bot.set_my_commands(commands)
        if self.config.mode == "webhook":
            if not self.config.webhook_url:
                raise ValueError("webhook mode needs PARLEY_TELEGRAM_WEBHOOK_URL")
            with observed(self.api):
                await self.bot.set_webhook(
                    url=self.config.webhook_url,
                    secret_token=self.config.webhook_secret,
                    allowed_updates=ALLOWED_UPDATES,
                )
            self.webhook_set = True

    async def start_polling(self) -> None:
        await self.ingress.start_polling()

    async def stop_polling(self) -> None:
        await self.ingress.stop_polling()

    async def stop(self) -> None:
        await self.stop_polling()
        with contextlib.suppress(TelegramError, RuntimeError):
            await self.bot.shutdown()
        await self._sender.shutdown()  # opened on first send even when the bot never initialized

    @property
    def polling(self) -> bool:
        return self.ingress.polling

    def polling_health(self) -> tuple[bool, str]:
        return self.ingress.polling_health()

    def health(self) -> tuple[bool, str]:
        """Whether Telegram is usable from here, and what was seen of it."""
        if self.me is None:
            return False, "not signed in yet (getMe has not succeeded)"
        ok, trouble = self.api.status()
        if self.ingress.polling:
            polled, detail = self.ingress.polling_health()
            return ok and polled, ", ".join(filter(None, [f"polling: {detail}", trouble]))
        if self.config.mode == "webhook" and not self.webhook_set:
            return False, "the webhook is not registered"
        return ok, trouble or f"signed in as @{self.me.username}"

    def webhook_route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return self.ingress.webhook_route()

    # --- platform events in -----------------------------------------------------------------

    def parse_update(self, data: object) -> Update | None:
        return parse(data, self.bot)

    async def process(self, update: Update) -> None:
        """Translate one update and hand it over."""
        event: Inbound | None = None
        query = update.callback_query
        if query is not None:
            event = self.inbound.action(update.update_id, query)
            if await self._paired(event):
                event = self.inbound.action(update.update_id, query, paired=True)
            if event is None:
                await self.bot.answer_callback_query(
                    query.id, "This button is no longer active.", show_alert=True
                )
                return
        elif update.message is not None:
            event = self.inbound.message(update.update_id, update.message)
            if await self._paired(event):
                event = self.inbound.message(update.update_id, update.message, paired=True)
            elif isinstance(event, InboundMessage) and event.kind == "not_allowed":
                event = await self._pairing_offer(event)
        elif "stopped_message_generation" in update.api_kwargs:
            stopped = update.api_kwargs["stopped_message_generation"]
            event = self.inbound.stopped(update.update_id, stopped)
        if event is None or self.handler is None:
            return
        if isinstance(event, InboundMessage) and event.kind in ("not_allowed", "pairing"):
            if self.inbound.refused_before(event):
                await self._acknowledge(query)
                return
            await self._hand_over(event)
            self.inbound.refusal_stored(event)
            await self._acknowledge(query)
            return
        await self._hand_over(event)

    async def _paired(self, event: Inbound | None) -> bool:
        return await paired_after_all(self.pairing, event)

    async def _pairing_offer(self, event: InboundMessage) -> InboundMessage:
        return await pairing_offer(self.pairing, event)

    async def _hand_over(self, event: Inbound) -> None:
        assert self.handler is not None
        await hand_over(self.handler, event, self.config.handover_timeout)

    async def _acknowledge(self, query: CallbackQuery | None) -> None:
        """Stop a pressed button's spinner without a word."""
        if query is None:
            return
        try:
            await self.bot.answer_callback_query(query.id)
        except TelegramError as exc:
            log.info("callback query not acknowledged: %s", type(exc).__name__)

    # --- neutral events out -----------------------------------------------------------------

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        parts = self.html(message.text, message.allowed_mentions)
        markup = keyboard(message)
        person = message.private_to
        if person is not None and person != conversation.chat_id:
            return await self._send_privately(conversation, message, parts, markup)
        receivers = [int(r) for r in dict.fromkeys(message.audience) if r.isdigit()]
        ephemeral = receivers and self.config.ephemeral_prompts and len(parts) == 1
        if ephemeral and int(conversation.chat_id) < 0:
            placed = await post_ephemeral(
                self.bot, self.api, conversation, parts[0], markup, receivers
            )
            if placed:
                ref = write(placed)
                await self.reoffers.watch(ref, conversation, parts[0], message, receivers)
                return MessageRef(conversation=conversation, message_id=ref)
        return await self.send_parts(conversation, parts, markup, message.reply_to)

    async def _send_privately(
        self,
        conversation: ConversationKey,
        message: OutboundMessage,
        parts: list[str],
        markup: InlineKeyboardMarkup | None,
    ) -> MessageRef:
        """A message for one person, asked for in a group: to their own chat with Parley, or,
        when Telegram will not let Parley write there first, the conversation is told that
        (`unreachable`, which holds nothing of the message)."""
        person = str(message.private_to)
        try:
            if not person.isdigit():
                raise Undeliverable(f"no private chat for {person!r}")
            ids = await post(self.bot, self.api, int(person), None, parts, markup)
        except Undeliverable as exc:
            if message.unreachable is None:
                raise
            log.info("cannot write to %s privately (%s); saying so in the chat", person, exc)
            note = self.html(message.unreachable, message.allowed_mentions)
            return await self.send_parts(conversation, note, None, message.reply_to)
        placed = [Placed(message_id=i, private_to=int(person)) for i in ids]
        return MessageRef(conversation=conversation, message_id=write(placed))

    async def send_parts(
        self,
        conversation: ConversationKey,
        parts: list[str],
        markup: InlineKeyboardMarkup | None,
        reply_to: str | None = None,
    ) -> MessageRef:
        """Post HTML parts in order, the buttons on the last; the ref names every part.
        The first part replies to message `reply_to` (in a group: the one that asked)."""
        chat, thread = int(conversation.chat_id), _thread(conversation)
        ids = await post(self.bot, self.api, chat, thread, parts, markup, reply_to)
        return MessageRef(
            conversation=conversation, message_id=write([Placed(message_id=i) for i in ids])
        )

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        """Edit every message `ref` names: each part, each receiver's copy. Parts the new
        text no longer needs are taken back; the buttons stay on the last."""
        parts = self.html(message.text, message.allowed_mentions)
        markup = keyboard(message)
        failure: DeliveryError | None = None
        for one in by_target(read(ref.message_id) + await self.reoffers.settled(ref.message_id)):
            for placed, html in zip(one, fitted(parts, len(one)), strict=True):
                try:
                    if html:
                        shown = self.reoffers.buttons(placed, message, ref.conversation, markup)
                        buttons = shown if placed is one[-1] else None
                        await edit_one(self.bot, self.api, ref.conversation, placed, html, buttons)
                    else:
                        await self._take_back(ref.conversation, placed)
                except DeliveryError as exc:
                    failure = failure or exc  # the other receivers' copies are edited still
        if failure is not None:
            raise failure

    async def _take_back(self, conversation: ConversationKey, placed: Placed) -> None:
        chat = placed.private_to or int(conversation.chat_id)
        try:
            await self.bot.delete_message(chat_id=chat, message_id=placed.message_id)
        except TelegramError as exc:
            log.info("could not take back a part no longer needed: %s", type(exc).__name__)

    async def edit_html(
        self, ref: MessageRef, html: str, markup: InlineKeyboardMarkup | None
    ) -> None:
        """Replace one message's text; an edit to the same text is no failure."""
        placed = Placed(message_id=int(ref.message_id))
        await edit_one(self.bot, self.api, ref.conversation, placed, html, markup)

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        if action.callback_id is None:
            return
        try:
            await self.bot.answer_callback_query(
                action.callback_id, text=text[:200], show_alert=alert
            )
        except BadRequest as exc:  # answered too late: Telegram forgets queries after a while
            log.info("callback query not answered: %s", exc)

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        if status is None:
            return  # Telegram clears "typing" by itself
        await self.bot.send_chat_action(
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
        self,
        conversation: ConversationKey,
        *,
        user_id: str,
        team_id: str | None,
        is_direct: bool,
        allowed_mentions: frozenset[str] = frozenset(),
        reply_to: str | None = None,
    ) -> TelegramLive:
        """Drafts in a private chat, one growing message elsewhere (replying to `reply_to`,
        the message that asked, like a whole answer would)."""
        return TelegramLive(
            poster=self,
            conversation=conversation,
            draft=is_direct and int(conversation.chat_id) > 0,
            allowed_mentions=allowed_mentions,
            reply_to=reply_to,
        )
