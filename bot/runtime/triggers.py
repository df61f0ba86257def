"""Event triggers: `POST /hooks/<name>` starts one objective in the trigger's conversation.

`PARLEY_TRIGGERS_CONFIG` names a JSON file of triggers, name → `secret`, `conversation`
(`telegram:<chat id>` or `slack:<team>/<channel>[/<thread ts>]`), `objective` (what to do;
`{name}` stands for the trigger's name) and optionally `owner` (the platform user id who may
approve what the run wants to do; without one, only `PARLEY_APPROVERS` can, in a shared
chat). A delivery is verified before anything else: `X-Parley-Signature: sha256=<hex>` must
be the HMAC-SHA256 of the body under the secret, and `X-Parley-Timestamp` (epoch seconds)
within `MAX_SKEW` of now. A verified delivery becomes one inbox entry, deduplicated by its
delivery id (`X-Parley-Delivery`, else `X-GitHub-Delivery`, else the signature), so a
replayed or retried delivery starts nothing more. The body reaches the model as untrusted
data, never as part of the objective.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from adapters.base import Actor, ContextMessage, ConversationKey, HandoverFailed, InboundMessage
from adapters.metrics import WEBHOOK_REJECTED
from bot.config import ConfigError
from bot.ops import metrics

log = logging.getLogger(__name__)

MAX_SKEW = 300.0  # seconds a delivery's timestamp may be off from now
MAX_BODY = 256 * 1024  # bytes
SIGNATURE = "X-Parley-Signature"
TIMESTAMP = "X-Parley-Timestamp"
DELIVERY = ("X-Parley-Delivery", "X-GitHub-Delivery")

Submit = Callable[[InboundMessage], Awaitable[bool]]


@dataclass(frozen=True, kw_only=True)
class Trigger:
    name: str
    secret: bytes
    conversation: ConversationKey
    objective: str
    owner: str | None = None

    @property
    def is_direct(self) -> bool:
        chat = self.conversation.chat_id
        if self.conversation.platform == "telegram":
            return not chat.startswith("-")  # groups and channels have negative ids
        return chat.startswith("D")

    def signed(self, body: bytes, signature: str) -> bool:
        expected = "sha256=" + hmac.new(self.secret, body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected.encode(), signature.strip().lower().encode())


def conversation_of(value: str) -> ConversationKey:
    """`telegram:<chat id>` or `slack:<team>/<channel>[/<thread ts>]`."""
    platform, _, rest = value.partition(":")
    if platform == "telegram" and rest.lstrip("-").isdigit():
        return ConversationKey(platform="telegram", chat_id=rest)
    parts = rest.split("/")
    if platform == "slack" and len(parts) in (2, 3) and all(parts):
        thread = parts[2] if len(parts) == 3 else None
        return ConversationKey(
            platform="slack", team_id=parts[0], chat_id=parts[1], thread_id=thread
        )
    raise ValueError(f"{value!r} is neither telegram:<chat id> nor slack:<team>/<channel>")


def load_triggers(path: Path | None) -> dict[str, Trigger]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"PARLEY_TRIGGERS_CONFIG {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"PARLEY_TRIGGERS_CONFIG {path}: expected an object of triggers")
    found: dict[str, Trigger] = {}
    for name, spec in data.items():
        where = f"PARLEY_TRIGGERS_CONFIG {path}, trigger {name!r}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected an object")
        missing = [k for k in ("secret", "conversation", "objective") if not spec.get(k)]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)}")
        if len(str(spec["secret"])) < 16:
            raise ConfigError(f"{where}: the secret needs at least 16 characters")
        try:
            conversation = conversation_of(str(spec["conversation"]))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        found[name] = Trigger(
            name=name,
            secret=str(spec["secret"]).encode(),
            conversation=conversation,
            objective=str(spec["objective"]).replace("{name}", name),
            owner=str(spec["owner"]) if spec.get("owner") else None,
        )
    return found


def objective_event(trigger: Trigger, body: bytes, delivery: str) -> InboundMessage:
    return InboundMessage(
        event_id=f"hook:{trigger.name}:{delivery}",
        conversation=trigger.conversation,
        actor=Actor(
            platform=trigger.conversation.platform,
            user_id=trigger.owner or f"trigger:{trigger.name}",
            name=f"trigger {trigger.name}",
            team_id=trigger.conversation.team_id,
        ),
        text=trigger.objective,
        is_direct=trigger.is_direct,
        kind="triggered",
        context=(
            ContextMessage(author=f"trigger {trigger.name}", text=body.decode(errors="replace")),
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Hooks:
    triggers: dict[str, Trigger]
    submit: Submit

    def route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/hooks/{name}", self.handle

    async def handle(self, request: web.Request) -> web.Response:
        trigger = self.triggers.get(request.match_info["name"])
        if trigger is None:
            return _answer("unknown", 404, "no such trigger")
        if (request.content_length or 0) > MAX_BODY:
            return _answer("too_large", 413, "body too large")
        body = await request.content.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            return _answer("too_large", 413, "body too large")
        try:
            stamp = float(request.headers.get(TIMESTAMP, ""))
        except ValueError:
            stamp = 0.0
        if abs(time.time() - stamp) > MAX_SKEW:
            return _answer("stale", 401, f"{TIMESTAMP} missing or more than 5 minutes off")
        signature = request.headers.get(SIGNATURE, "")
        if not trigger.signed(body, signature):
            return _answer("bad_signature", 401, f"{SIGNATURE} does not match the body")
        delivery = next((request.headers[h] for h in DELIVERY if request.headers.get(h)), "")
        delivery = delivery[:128] or signature.strip().lower().removeprefix("sha256=")
        try:
            fresh = await self.submit(objective_event(trigger, body, delivery))
        except HandoverFailed:
            return _answer("unavailable", 503, "try again later")
        if not fresh:
            return _answer("duplicate", 200, "already received")
        log.info("trigger %s started an objective in %s", trigger.name, trigger.conversation.id)
        return _answer("started", 202, "started")


REJECTED = {"bad_signature": "signature", "stale": "stale"}


def _answer(result: str, status: int, text: str) -> web.Response:
    metrics.TRIGGERS.labels(result).inc()
    if result in REJECTED:  # beside the platforms' refusals, for one alert on all of them
        WEBHOOK_REJECTED.labels("hooks", REJECTED[result]).inc()
    return web.json_response({"status": result, "detail": text}, status=status)
