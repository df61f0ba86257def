"""Event triggers: `POST /hooks/<name>` starts one objective in the trigger's conversation.

`PARLEY_TRIGGERS_CONFIG` names a JSON file of triggers, name → `secret`, `conversation`
(`telegram:<chat id>` or `slack:<team>/<channel>[/<thread ts>]`), `objective` (what to do;
`{name}` stands for the trigger's name, the only placeholder: the body never becomes part of
the objective) and optionally `owner` (the platform user id who may approve what the run
wants to do; without one, only `PARLEY_APPROVERS` can, in a shared chat).

A delivery is verified before anything else, the way Slack and Stripe sign theirs:
`X-Parley-Signature: v1=<hex>` must be the HMAC-SHA256, under the secret, of
`v1:<X-Parley-Timestamp>:<X-Parley-Delivery>:<body>` over the whole body, the timestamp
(decimal epoch seconds: no `nan`, `inf`, sign or exponent) within `MAX_SKEW` of now, and the
delivery id (letters, digits, `.`, `_`, `-`: no `:`, so the signed fields cannot be re-cut)
not seen in the last `REPLAY_WINDOW`. A verified delivery becomes one inbox entry keyed by
its delivery id, so a replayed or retried delivery starts nothing more. The body reaches the
model as untrusted data, never as part of the objective.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from adapters import traits
from adapters.base import Actor, ContextMessage, ConversationKey, HandoverFailed, InboundMessage
from adapters.metrics import WEBHOOK_REJECTED
from bot.config import ConfigError
from bot.ops import metrics
from bot.runtime.keys import trigger_event

log = logging.getLogger(__name__)

MAX_SKEW = 300.0  # seconds a delivery's timestamp may be off from now
# A delivery id must be remembered for as long as its timestamp can pass: both sides of now.
REPLAY_WINDOW = 2 * MAX_SKEW
MAX_BODY = 256 * 1024  # bytes
SIGNATURE = "X-Parley-Signature"
TIMESTAMP = "X-Parley-Timestamp"
DELIVERY = "X-Parley-Delivery"
STAMP = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
DELIVERY_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
PLACEHOLDER = re.compile(r"\{(\w*)\}")

Submit = Callable[[InboundMessage], Awaitable[bool]]


def signature_of(secret: bytes, timestamp: str, delivery: str, body: bytes) -> str:
    """The `X-Parley-Signature` value a sender puts on a delivery."""
    signed = f"v1:{timestamp}:{delivery}:".encode() + body
    return "v1=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def timestamp_of(value: str) -> float | None:
    """Epoch seconds from the header, or None for anything that is not a plain finite number."""
    if not STAMP.fullmatch(value):
        return None
    stamp = float(value)
    return stamp if math.isfinite(stamp) else None


@dataclass(frozen=True, kw_only=True)
class Trigger:
    name: str
    secret: bytes
    conversation: ConversationKey
    objective: str
    owner: str | None = None

    @property
    def address(self) -> str:
        """The conversation as the triggers file writes it."""
        return traits.of(self.conversation.platform).written(self.conversation)

    @property
    def is_direct(self) -> bool:
        return traits.of(self.conversation.platform).is_direct(self.conversation)

    def signed(self, timestamp: str, delivery: str, body: bytes, signature: str) -> bool:
        expected = signature_of(self.secret, timestamp, delivery, body)
        return hmac.compare_digest(expected.encode(), signature.strip().lower().encode())


def conversation_of(value: str) -> ConversationKey:
    """`<platform>:<address>`, written as the platform's adapter declares (adapters/traits.py)."""
    platform, _, rest = value.partition(":")
    found = traits.of(platform).parse(rest)
    if found is not None:
        return found
    hints = " nor ".join(t.address_hint for t in traits.known())
    raise ValueError(f"{value!r} is neither {hints}")


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
        objective = str(spec["objective"])
        unknown = sorted({f"{{{p}}}" for p in PLACEHOLDER.findall(objective)} - {"{name}"})
        if unknown:
            raise ConfigError(
                f"{where}: {', '.join(unknown)} in the objective is no placeholder (only "
                "{name} is); the body reaches the model beside the objective, as data"
            )
        found[name] = Trigger(
            name=name,
            secret=str(spec["secret"]).encode(),
            conversation=conversation,
            objective=objective.replace("{name}", name),
            owner=str(spec["owner"]) if spec.get("owner") else None,
        )
    return found


def undeliverable(triggers: dict[str, Trigger], platforms: set[str]) -> list[str]:
    """One line for each trigger whose conversation is on a chat platform not configured:
    its runs could never post anything."""
    return [
        f"trigger {t.name!r} posts to {t.address}, but "
        f"{t.conversation.platform.capitalize()} is not configured: set "
        f"{traits.of(t.conversation.platform).token_setting} or change the trigger's conversation"
        for t in triggers.values()
        if t.conversation.platform not in platforms
    ]


def deliverable_triggers(path: Path | None, platforms: set[str]) -> dict[str, Trigger]:
    """The triggers file loaded, or a ConfigError naming the first problem with it."""
    triggers = load_triggers(path)
    problems = undeliverable(triggers, platforms)
    if problems:
        raise ConfigError(f"PARLEY_TRIGGERS_CONFIG {path}: " + "; ".join(problems))
    return triggers


def objective_event(trigger: Trigger, body: bytes, delivery: str) -> InboundMessage:
    return InboundMessage(
        event_id=trigger_event(trigger.name, delivery),
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
    submit: Submit  # deduplicates by event id for at least REPLAY_WINDOW
    clock: Callable[[], float] = field(default=time.time)

    def route(self) -> tuple[str, str, Callable[[web.Request], Awaitable[web.Response]]]:
        return "POST", "/hooks/{name}", self.handle

    async def handle(self, request: web.Request) -> web.Response:
        trigger = self.triggers.get(request.match_info["name"])
        if trigger is None:
            return _answer("unknown", 404, "no such trigger")
        body = await _whole_body(request)
        if body is None:
            return _answer("too_large", 413, "body too large")
        stamp_text = request.headers.get(TIMESTAMP, "").strip()
        stamp = timestamp_of(stamp_text)
        if stamp is None or abs(self.clock() - stamp) > MAX_SKEW:
            return _answer("stale", 401, f"{TIMESTAMP} missing, not epoch seconds or >5 min off")
        delivery = request.headers.get(DELIVERY, "").strip()
        if not DELIVERY_ID.fullmatch(delivery):
            detail = f"{DELIVERY} missing or not 1-128 of A-Z a-z 0-9 . _ -"
            return _answer("bad_signature", 401, detail)
        if not trigger.signed(stamp_text, delivery, body, request.headers.get(SIGNATURE, "")):
            detail = f"{SIGNATURE} is not v1=HMAC-SHA256 of v1:<timestamp>:<delivery>:<body>"
            return _answer("bad_signature", 401, detail)
        try:
            fresh = await self.submit(objective_event(trigger, body, delivery))
        except HandoverFailed:
            return _answer("unavailable", 503, "try again later")
        if not fresh:  # a sender's retry, or a replay: either way nothing more starts
            return _answer("duplicate", 200, "already received")
        log.info("trigger %s started an objective in %s", trigger.name, trigger.conversation.id)
        return _answer("started", 202, "started")


async def _whole_body(request: web.Request) -> bytes | None:
    """Every piece of the body, however many reads it takes; None past MAX_BODY."""
    if (request.content_length or 0) > MAX_BODY:
        return None
    pieces: list[bytes] = []
    size = 0
    while piece := await request.content.read(MAX_BODY + 1 - size):
        pieces.append(piece)
        size += len(piece)
        if size > MAX_BODY:
            return None
    return b"".join(pieces)


REJECTED = {"bad_signature": "signature", "stale": "stale"}


def _answer(result: str, status: int, text: str) -> web.Response:
    metrics.TRIGGERS.labels(result).inc()
    if result in REJECTED:  # beside the platforms' refusals, for one alert on all of them
        WEBHOOK_REJECTED.labels("hooks", REJECTED[result]).inc()
    return web.json_response({"status": result, "detail": text}, status=status)
