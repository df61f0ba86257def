"""Sign-ins that came back, held until their person confirms them in the chat.

Whoever opens a Connect link signs in with *their* account; a forwarded link would attach a
stranger's account to the person it was made for. So the callback does not store the tokens
as the person's: it holds them (encrypted, `oauth:held:<platform>:<user>:<sha256 of the
code>`, for `PARLEY_CONNECT_TTL`) and shows a one-time code on its page. The tokens become
the person's only when that person types the code in the chat where they asked (or their
own direct chat with Parley): the code proves that whoever finished the sign-in in the
browser is the one in the chat. A code works once; an expired one, one typed by someone
else or in another shared chat does nothing; after `MAX_TRIES` wrong codes the person's held
sign-ins are dropped.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from cryptography.fernet import InvalidToken, MultiFernet
from redis.asyncio import Redis

from bot.runtime.codec import Codec, as_text
from bot.runtime.keys import Keys

CODE_DIGITS = 6
MAX_TRIES = 5  # wrong codes while sign-ins are held, before they are all dropped


def shown(code: str) -> str:
    return f"{code[:3]} {code[3:]}"


@dataclass(frozen=True, kw_only=True)
class SignIn:
    """Whose sign-in it is, for which server, and which waiting run it resumes: the same
    while it is under way (`store.Pending`) and once it came back (`Held`)."""

    server: str
    platform: str
    user_id: str
    user_name: str
    team_id: str | None
    conversation_id: str
    is_direct: bool
    question_id: str

    def sign_in(self) -> dict[str, Any]:
        """Only the `SignIn` fields, to make the next stage of it."""
        return {f.name: getattr(self, f.name) for f in fields(SignIn)}


@dataclass(frozen=True, kw_only=True)
class Held(SignIn):
    """A sign-in waiting for its person: whose, where they asked, and the tokens."""

    tokens: str  # oauth.Tokens as JSON
    expires: float  # epoch seconds


RECORD: Codec[Held] = Codec(Held)


@dataclass(frozen=True, kw_only=True)
class Confirmation:
    """What a typed code came to: `held` when it confirmed one, else `refusal` says why."""

    held: Held | None = None
    refusal: str | None = None  # "wrong", "expired", "elsewhere", "too_many"


class HeldSignIns:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        fernet: MultiFernet,
        ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.fernet = fernet
        self.ttl = ttl
        self.clock = clock

    async def hold(self, held: Held) -> str:
        """Keep `held` (its `expires` is set here) and return its one-time code."""
        ms = int(self.ttl * 1000)
        sealed = replace(held, expires=self.clock() + self.ttl)
        value = self.fernet.encrypt(RECORD.encode(sealed))
        for _ in range(20):  # a code already held for this person is drawn again
            code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
            digest = _digest(held.platform, held.user_id, code)
            key = self.keys.oauth_held(held.platform, held.user_id, digest)
            if await self.redis.set(key, value, px=ms, nx=True):
                index = self.keys.oauth_holding(held.platform, held.user_id)
                await self.redis.sadd(index, digest)
                await self.redis.pexpire(index, ms)
                return code
        raise RuntimeError("no free code")  # 20 collisions in a million: not by chance

    async def any_for(self, platform: str, user_id: str) -> bool:
        return bool(await self.redis.scard(self.keys.oauth_holding(platform, user_id)))

    async def confirm(
        self, platform: str, user_id: str, conversation_id: str, is_direct: bool, code: str
    ) -> Confirmation:
        """Take the sign-in `code` confirms, once, if it was typed where it may be."""
        code = "".join(ch for ch in code if ch.isdigit())  # as shown ("123 456") or typed
        digest = _digest(platform, user_id, code)
        key = self.keys.oauth_held(platform, user_id, digest)
        raw = await self.redis.get(key)
        held = self._open(raw) if raw is not None else None
        if held is None:
            return await self._wrong(platform, user_id)
        if held.expires <= self.clock():
            await self._drop(platform, user_id, digest)
            return Confirmation(refusal="expired")
        # where they asked, or their own direct chat (where a group's Connect link went)
        if conversation_id != held.conversation_id and not is_direct:
            return Confirmation(refusal="elsewhere")
        if not await self.redis.delete(key):  # taken meanwhile: a code works once
            return await self._wrong(platform, user_id)
        await self.redis.srem(self.keys.oauth_holding(platform, user_id), digest)
        await self.redis.delete(self.keys.oauth_tries(platform, user_id))
        return Confirmation(held=held)

    async def _wrong(self, platform: str, user_id: str) -> Confirmation:
        tries_key = self.keys.oauth_tries(platform, user_id)
        tries = await self.redis.incr(tries_key)
        if tries == 1:
            await self.redis.pexpire(tries_key, int(self.ttl * 1000))
        if tries < MAX_TRIES:
            return Confirmation(refusal="wrong")
        index = self.keys.oauth_holding(platform, user_id)
        for digest in await self.redis.smembers(index):
            text = as_text(digest)
            await self.redis.delete(self.keys.oauth_held(platform, user_id, text))
        await self.redis.delete(index, tries_key)
        return Confirmation(refusal="too_many")

    async def _drop(self, platform: str, user_id: str, digest: str) -> None:
        await self.redis.delete(self.keys.oauth_held(platform, user_id, digest))
        await self.redis.srem(self.keys.oauth_holding(platform, user_id), digest)

    def _open(self, raw: bytes | str) -> Held | None:
        try:
            return RECORD.decode(self.fernet.decrypt(raw))
        except InvalidToken:
            return None


def _digest(platform: str, user_id: str, code: str) -> str:
    return hashlib.sha256(f"{platform}:{user_id}:{code}".encode()).hexdigest()
