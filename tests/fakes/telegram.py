"""A local server that plays the Telegram Bot API for python-telegram-bot.

    fake = FakeTelegram(token="123:ABC")
    await fake.start()                     # Bot API root: fake.url (TELEGRAM_API_URL)
    fake.push(fake.message(chat_id=42, user_id=42, text="hi"))       # served by getUpdates
    fake.push(fake.callback(chat_id=42, user_id=42, message_id=7, data="d:abc:approve"))
    fake.fail_next("sendMessage", retry_after=1)                      # a 429 with retry_after
    fake.answer_error("sendMessage", 502, "Bad Gateway", times=2)      # any error answer

    file_id = fake.add_file(b"...", path="photos/a.jpg")   # for getFile and the file URL

Like the real Bot API, getUpdates keeps each update until a later call's offset confirms it
(`fake.updates` holds the unconfirmed ones), so an update confirmed before it was stored is
gone for good. It serves getMe, getUpdates (long poll honouring offset and timeout), setWebhook,
deleteWebhook, setMyCommands, getChatMember (`fake.members`), sendMessage, editMessageText, answerCallbackQuery and
sendChatAction, editEphemeralMessageText, sendMessageDraft (private chats only; every draft text is kept in
`fake.drafts[(chat_id, draft_id)]`; a draft sent with `can_stop` (Bot API 10.3) is in
`fake.stoppable`, and `fake.stop_generation(chat_id, draft_id)` builds the
`stopped_message_generation` update its stop button sends; a stopped draft takes no more
updates), deleteMessage, getFile (400 for an unknown id or a file
over 20 MB, as the Bot API does) and `GET /file/bot<token>/<file_path>`, and keeps what the
bot posted per chat (`fake.chat(42)`: the messages with
their current text and keyboard, edits applied) and every call (`fake.calls("/bot…/x")`,
or `fake.method_calls("sendMessage")`). Update builders return Bot API JSON dicts, which can
also be POSTed to a webhook.

A `sendMessage` with `ephemeral_message_parameters` (Bot API 10.2) posts a message only its
`receiver_user_id` sees (`Posted.receiver`, `fake.seen_by(chat, user)`), answered with its
`ephemeral_message_id`; `fake.ephemeral = False` plays an older server, which ignores the
parameter. A person in `fake.unreachable` never opened a chat with the bot: a send to them
gets the Bot API's 403.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.server import FakeServer, Recorded

BOT_ID = 999_000
BOT_USERNAME = "parley_bot"


@dataclass
class Posted:
    chat_id: int
    message_id: int
    text: str
    reply_markup: dict[str, Any] | None
    thread_id: int | None = None
    edits: list[str] = field(default_factory=list)
    receiver: int | None = None  # an ephemeral message (Bot API 10.2): only they see it
    ephemeral_id: int | None = None

    @property
    def buttons(self) -> list[dict[str, Any]]:
        if not self.reply_markup:
            return []
        return [b for row in self.reply_markup.get("inline_keyboard", []) for b in row]


# The flags a ChatMember of each kind carries (Bot API 9): python-telegram-bot needs them all.
_MEMBER_FLAGS = {
    "administrator": [
        "can_be_edited",
        "is_anonymous",
        "can_manage_chat",
        "can_delete_messages",
        "can_manage_video_chats",
        "can_restrict_members",
        "can_promote_members",
        "can_change_info",
        "can_invite_users",
        "can_post_stories",
        "can_edit_stories",
        "can_delete_stories",
    ],
    "restricted": [
        "is_member",
        "can_change_info",
        "can_invite_users",
        "can_pin_messages",
        "can_send_messages",
        "can_send_polls",
        "can_send_other_messages",
        "can_add_web_page_previews",
        "can_manage_topics",
        "can_send_audios",
        "can_send_documents",
        "can_send_photos",
        "can_send_videos",
        "can_send_video_notes",
        "can_send_voice_notes",
    ],
}


class FakeTelegram(FakeServer):
    def __init__(self, token: str = "123456:TEST-token") -> None:
        super().__init__(name="telegram")
        self.token = token
        self.updates: list[dict[str, Any]] = []
        self.posted: list[Posted] = []
        self.failures: dict[str, list[int]] = {}
        self.drafts: dict[tuple[int, int], list[str]] = {}
        self.stoppable: set[tuple[int, int]] = set()  # drafts offering the stop button
        self.stopped_drafts: set[tuple[int, int]] = set()
        self.deleted: list[Posted] = []
        # people who never opened a private chat with the bot: it may not write to them first
        self.unreachable: set[int] = set()
        # getChatMember: a chat listed here knows only these members (status by user id);
        # anyone else in it has "left". A chat not listed counts everyone as a member.
        self.members: dict[int, dict[int, str]] = {}
        # Bot API 10.2 ephemeral messages; False plays an older server, which ignores the
        # unknown parameter and posts the message for everyone
        self.ephemeral = True
        self._ephemeral_ids = itertools.count(1)
        self.errors: dict[str, list[tuple[int, str]]] = {}
        # awaited once before the next call of a method is answered (e.g. to stop Redis then)
        self.before: dict[str, Callable[[], Awaitable[object]]] = {}
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._new_update = asyncio.Event()
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, bytes)
        self._file_ids = itertools.count(1)
        self.add("POST", f"/bot{token}/*", self._dispatch_method)
        self.add("GET", f"/file/bot{token}/*", self._file)

    # --- scripting --------------------------------------------------------------------------

    def push(self, update: dict[str, Any]) -> dict[str, Any]:
        self.updates.append(update)
        self._new_update.set()
        return update

    def fail_next(self, method: str, *, retry_after: int) -> None:
        self.failures.setdefault(method, []).append(retry_after)

    def answer_error(self, method: str, status: int, description: str, *, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with the Bot API's error body."""
        self.errors.setdefault(method, []).extend([(status, description)] * times)

    def add_file(self, data: bytes, *, path: str | None = None) -> str:
        file_id = f"BQACAgIAAx{next(self._file_ids):06d}"
        self.files[file_id] = (path or f"documents/{file_id}", data)
        return file_id

    def photo_sizes(self, *sizes: tuple[str, int, int]) -> list[dict[str, Any]]:
        """PhotoSize objects for (file_id, width, height), with the files' real sizes."""
        return [
            {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "width": width,
                "height": height,
                "file_size": len(self.files[file_id][1]) if file_id in self.files else 1,
            }
            for file_id, width, height in sizes
        ]

    def user(self, user_id: int, name: str = "Ana", username: str | None = None) -> dict[str, Any]:
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": name}
        if username:
            user["username"] = username
        return user

    def message(
        self,
        *,
        chat_id: int,
        user_id: int,
        text: str | None = None,
        name: str = "Ana",
        username: str | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to_bot: bool = False,
        photo: bool | list[dict[str, Any]] = False,
        document: dict[str, Any] | None = None,
        caption: str | None = None,
        sticker: bool = False,
        reply_to: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,  # more fields, e.g. {"voice": {…}}
    ) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type != "private":
            chat["title"] = "A group"
            if thread_id is not None:
                chat["is_forum"] = True
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": self.user(user_id, name, username),
        }
        if text is not None:
            message["text"] = text
            entities = _entities(text)
            if entities:
                message["entities"] = entities
        if photo is True:
            message["photo"] = [{"file_id": "p1", "file_unique_id": "u1", "width": 1, "height": 1}]
        elif photo:
            message["photo"] = photo
        if document is not None:
            message["document"] = {"file_unique_id": f"u{document['file_id']}", **document}
        if caption is not None:
            message["caption"] = caption
            caption_entities = _entities(caption)
            if caption_entities:
                message["caption_entities"] = caption_entities
        if sticker:
            message["sticker"] = {
                "file_id": "s1",
                "file_unique_id": "us1",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
            }
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        message.update(extra or {})
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to_bot:
            message["reply_to_message"] = {
                "message_id": 1,
                "date": int(time.time()),
                "chat": chat,
                "from": {
                    "id": BOT_ID,
                    "is_bot": True,
                    "first_name": "Parley",
                    "username": BOT_USERNAME,
                },
                "text": "earlier",
            }
        return {"update_id": next(self._update_ids), "message": message}

    def stop_generation(
        self, chat_id: int, draft_id: int, *, thread_id: int | None = None, name: str = "Ana"
    ) -> dict[str, Any]:
        """The update Telegram sends when the person presses a draft's stop button."""
        self.stopped_drafts.add((chat_id, draft_id))
        stopped: dict[str, Any] = {
            "chat": {"id": chat_id, "type": "private", "first_name": name},
            "draft_id": draft_id,
        }
        if thread_id is not None:
            stopped["message_thread_id"] = thread_id
        return {"update_id": next(self._update_ids), "stopped_message_generation": stopped}

    def callback(
        self,
        *,
        chat_id: int,
        user_id: int,
        message_id: int,
        data: str,
        name: str = "Ana",
        chat_type: str = "private",
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Parley",
                "username": BOT_USERNAME,
            },
            "text": "buttons",
        }
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        return {
            "update_id": next(self._update_ids),
            "callback_query": {
                "id": f"cq{next(self._update_ids)}",
                "from": self.user(user_id, name),
                "chat_instance": "ci",
                "message": message,
                "data": data,
            },
        }

    def click(
        self,
        posted: Posted,
        choice_label: str,
        *,
        user_id: int,
        name: str = "Ana",
        chat_type: str = "private",
    ) -> dict[str, Any]:
        """A press of the button labelled `choice_label` on a posted message."""
        button = next(b for b in posted.buttons if b["text"] == choice_label)
        pressed = self.callback(
            chat_id=posted.chat_id,
            user_id=user_id,
            message_id=posted.message_id,
            data=button["callback_data"],
            name=name,
            chat_type=chat_type,
            thread_id=posted.thread_id,
        )
        if posted.receiver is not None:
            message = pressed["callback_query"]["message"]
            message["ephemeral_message_id"] = posted.ephemeral_id
            message["receiver_user"] = self.user(posted.receiver)
        return self.push(pressed)

    # --- reading what the bot did -----------------------------------------------------------

    def chat(self, chat_id: int) -> list[Posted]:
        return [p for p in self.posted if p.chat_id == chat_id]

    def seen_by(self, chat_id: int, user_id: int | None) -> list[Posted]:
        """What a member of the chat sees of the bot's messages (None: someone not addressed)."""
        return [p for p in self.chat(chat_id) if p.receiver in (None, user_id)]

    def method_calls(self, method: str) -> list[Recorded]:
        return self.calls(f"/bot{self.token}/{method}")

    # --- the API ----------------------------------------------------------------------------

    async def _dispatch_method(
        self, recorded: Recorded, request: web.Request
    ) -> web.StreamResponse:
        method = request.path.rsplit("/", 1)[-1]
        params = await _params(recorded, request)
        recorded.body = params
        if (hook := self.before.pop(method, None)) is not None:
            await hook()
        errors = self.errors.get(method)
        if errors:
            status, description = errors.pop(0)
            return web.json_response(
                {"ok": False, "error_code": status, "description": description}, status=status
            )
        pending = self.failures.get(method)
        if pending:
            retry_after = pending.pop(0)
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 429,
                    "description": f"Too Many Requests: retry after {retry_after}",
                    "parameters": {"retry_after": retry_after},
                },
                status=429,
            )
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found: method not found"},
                status=404,
            )
        result = await handler(params)
        if isinstance(result, web.Response):
            return result
        return web.json_response({"ok": True, "result": result})

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id") or "")
        if file_id not in self.files:
            return _bad_request("Bad Request: invalid file_id")
        path, data = self.files[file_id]
        if len(data) > 20 * 1024 * 1024:
            return _bad_request("Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    async def _file(self, recorded: Recorded, request: web.Request) -> web.StreamResponse:
        path = request.path.removeprefix(f"/file/bot{self.token}/")
        for file_path, data in self.files.values():
            if file_path == path:
                return web.Response(body=data, content_type="application/octet-stream")
        return web.json_response(
            {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
        )

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Parley",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        deadline = time.monotonic() + timeout
        # An offset confirms every update below it: those are forgotten.
        self.updates = [u for u in self.updates if u["update_id"] >= offset]
        while True:
            ready = [u for u in self.updates if u["update_id"] >= offset]
            if ready or time.monotonic() >= deadline:
                return ready[:100]
            self._new_update.clear()
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self._new_update.wait()
            except TimeoutError:
                pass

    async def _m_setWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_setMyCommands(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_getChatMember(self, params: dict[str, Any]) -> Any:
        chat_id, user_id = int(params["chat_id"]), int(params["user_id"])
        status = self.members.get(chat_id, {}).get(
            user_id, "left" if chat_id in self.members else "member"
        )
        user = {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"}
        member: dict[str, Any] = {"status": status, "user": user}
        if status in ("administrator", "restricted"):  # each kind's flags, all off
            member |= dict.fromkeys(_MEMBER_FLAGS[status], False)
        if status in ("kicked", "restricted"):
            member["until_date"] = 0
        if status == "creator":
            member["is_anonymous"] = False
        return member

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        if chat_id in self.unreachable:
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 403,
                    "description": "Forbidden: bot can't initiate conversation with a user",
                },
                status=403,
            )
        thread = int(params["message_thread_id"]) if params.get("message_thread_id") else None
        posted = Posted(
            chat_id=chat_id,
            message_id=next(self._message_ids),
            text=str(params.get("text", "")),
            reply_markup=_markup(params.get("reply_markup")),
            thread_id=thread,
        )
        ephemeral = params.get("ephemeral_message_parameters")
        if ephemeral and self.ephemeral:
            receiver = json.loads(ephemeral) if isinstance(ephemeral, str) else ephemeral
            posted.receiver = int(receiver["receiver_user_id"])
            posted.ephemeral_id = next(self._ephemeral_ids)
        self.posted.append(posted)
        return self._message_json(posted)

    async def _m_editEphemeralMessageText(self, params: dict[str, Any]) -> Any:
        chat_id, receiver = int(params["chat_id"]), int(params["receiver_user_id"])
        ephemeral_id = int(params["ephemeral_message_id"])
        for posted in self.posted:
            if (posted.chat_id, posted.receiver, posted.ephemeral_id) == (
                chat_id,
                receiver,
                ephemeral_id,
            ):
                posted.edits.append(posted.text)
                posted.text = str(params.get("text", ""))
                posted.reply_markup = _markup(params.get("reply_markup"))
                return True
        return _bad_request("Bad Request: message to edit not found")

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> Any:
        chat_id, draft_id = int(params["chat_id"]), int(params.get("draft_id") or 0)
        if chat_id < 0:
            return _bad_request("TEXTDRAFT_PEER_INVALID")
        if draft_id == 0:
            return _bad_request("DRAFT_ID_INVALID")
        text = str(params.get("text", ""))
        if len(text) > 4096:
            return _bad_request("message is too long")
        if (chat_id, draft_id) in self.stopped_drafts:
            return _bad_request(
                "DRAFT_STOPPED"
            )  # inferred: the API's exact answer is not documented
        self.drafts.setdefault((chat_id, draft_id), []).append(text)
        if str(params.get("can_stop")).lower() == "true":
            self.stoppable.add((chat_id, draft_id))
        return True

    async def _m_deleteMessage(self, params: dict[str, Any]) -> Any:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        for posted in self.posted:
            if posted.chat_id == chat_id and posted.message_id == message_id:
                self.posted.remove(posted)
                self.deleted.append(posted)
                return True
        return _bad_request("message to delete not found")

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        for posted in self.posted:
            if posted.chat_id == chat_id and posted.message_id == message_id:
                markup = _markup(params.get("reply_markup"))
                if posted.text == str(params.get("text", "")) and posted.reply_markup == markup:
                    return _bad_request(
                        "message is not modified: specified new message content and reply "
                        "markup are exactly the same as a current content and reply markup "
                        "of the message"
                    )
                posted.edits.append(posted.text)
                posted.text = str(params.get("text", ""))
                posted.reply_markup = _markup(params.get("reply_markup"))
                return self._message_json(posted)
        return web.json_response(
            {
                "ok": False,
                "error_code": 400,
                "description": "Bad Request: message to edit not found",
            },
            status=400,
        )

    def _message_json(self, posted: Posted) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": posted.message_id,
            "date": int(time.time()),
            "chat": {
                "id": posted.chat_id,
                "type": "private" if posted.chat_id > 0 else "supergroup",
            },
            "from": {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Parley",
                "username": BOT_USERNAME,
            },
            "text": posted.text,
        }
        if posted.reply_markup:
            message["reply_markup"] = posted.reply_markup
        if posted.thread_id is not None:
            message["message_thread_id"] = posted.thread_id
            message["is_topic_message"] = True
        if posted.receiver is not None:
            message["ephemeral_message_id"] = posted.ephemeral_id
            message["receiver_user"] = self.user(posted.receiver)
        return message


def _bad_request(description: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error_code": 400, "description": f"Bad Request: {description}"},
        status=400,
    )


async def _params(recorded: Recorded, request: web.Request) -> dict[str, Any]:
    """The call's parameters: from the query string and the body, as the Bot API takes them."""
    body = recorded.body
    if isinstance(body, dict):
        return {**recorded.query, **body}
    if request.content_type.startswith("multipart/"):
        reader = await _multipart(recorded.raw, request.headers["Content-Type"])
        return {**recorded.query, **reader}
    return dict(recorded.query)


async def _multipart(raw: bytes, content_type: str) -> dict[str, Any]:
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw
    )
    out: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            payload = part.get_payload(decode=True) or b""
            out[str(name)] = payload.decode()
    return out


def _bad_request(description: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error_code": 400, "description": description}, status=400
    )


def _markup(value: Any) -> dict[str, Any] | None:
    if not value:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else None


def _entities(text: str) -> list[dict[str, Any]]:
    entities = []
    for word_start, word in _words(text):
        if word.startswith("@") and len(word) > 1:
            entities.append({"type": "mention", "offset": word_start, "length": len(word)})
        elif word.startswith("/") and word_start == 0:
            entities.append({"type": "bot_command", "offset": 0, "length": len(word)})
    return entities


def _words(text: str) -> list[tuple[int, str]]:
    out, position = [], 0
    for word in text.split(" "):
        out.append((position, word.rstrip(",.!?")))
        position += len(word) + 1
    return out
