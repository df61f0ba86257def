"""Telegram pairing: with `PARLEY_TELEGRAM_ACCESS=pairing` (the default) a person who is not
on `PARLEY_TELEGRAM_ALLOWED_USERS` and writes to the bot privately gets a pairing code; once
the operator (`parley pairing approve <code>`) or an approver (`/pair <code>` in a chat)
accepts it, that person is paired and talks to Parley like an allowlisted one.

A code is 8 letters and digits without look-alikes (about 40 bits), lives `CODE_TTL`, is
used once, and names the one person it was made for: whoever accepts it admits that person,
never the one who typed it. A person has one live code at a time (asking again shows the
same one). Paired people are kept in one Redis set per platform until revoked.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import Annotated

import redis.asyncio as aioredis
from pydantic import Field

from bot.config import Settings
from bot.runtime.codec import Codec, as_text
from bot.runtime.keys import Keys

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I
CODE_LENGTH = 8
CODE_TTL = 3600  # seconds a code can be accepted
MAX_PENDING = 100  # live codes at once: past this, the oldest requests go first


@dataclass(frozen=True, kw_only=True)
class Request:
    platform: str
    user_id: str
    name: str
    code: Annotated[str, Field(exclude=True)] = ""  # the key it is stored under, not in it


RECORD: Codec[Request] = Codec(Request)


def access_line(settings: Settings) -> str:
    """Who may talk to the Telegram bot, in one line (start-up log, doctor)."""
    listed = len(settings.telegram.allowed_users)
    if settings.telegram.access == "open":
        if listed:
            return f"allowlist: the {listed} on PARLEY_TELEGRAM_ALLOWED_USERS, nobody else"
        return "open: anyone who finds the bot (PARLEY_TELEGRAM_ACCESS=open)"
    who = f"the {listed} on PARLEY_TELEGRAM_ALLOWED_USERS and" if listed else ""
    return (
        f"pairing: {who} people paired with a code (`parley pairing`); "
        "anyone else gets a pairing code"
    ).replace(":  ", ": ")


def normalised(code: str) -> str:
    return "".join(c for c in code.upper() if c.isalnum())


class Pairings:
    def __init__(self, redis: aioredis.Redis, keys: Keys, platform: str = "telegram") -> None:
        self.redis = redis
        self.keys = keys
        self.platform = platform

    async def admitted(self, user_id: str) -> bool:
        return bool(await self.redis.sismember(self.keys.paired(self.platform), user_id))

    async def code_for(self, user_id: str, name: str) -> str:
        """The person's live code, or a new one."""
        mine = self.keys.pairing_pending(self.platform, user_id)
        existing = await self.redis.get(mine)
        if existing is not None:
            code = as_text(existing)
            if await self.redis.exists(self.keys.pairing_code(code)):
                return code
        code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
        record = RECORD.encode(Request(platform=self.platform, user_id=user_id, name=name))
        queue = self.keys.pairing_queue(self.platform)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.pairing_code(code), record, ex=CODE_TTL)
            pipe.set(mine, code, ex=CODE_TTL)
            pipe.rpush(queue, code)
            pipe.ltrim(queue, -MAX_PENDING, -1)
            pipe.expire(queue, CODE_TTL)
            await pipe.execute()
        return code

    async def pending(self) -> list[Request]:
        """The live requests, oldest first."""
        found = []
        for raw in await self.redis.lrange(self.keys.pairing_queue(self.platform), 0, -1):
            request = await self._request(as_text(raw))
            if request is not None:
                found.append(request)
        return found

    async def approve(self, code: str) -> Request | None:
        """Admit the person a live code was made for; None if no such code (any more)."""
        code = normalised(code)
        if code not in {r.code for r in await self.pending()}:
            return None  # pushed out of the queue, expired or used: no longer live
        raw = await self.redis.getdel(self.keys.pairing_code(code))
        if raw is None:
            return None
        request = replace(RECORD.decode(raw), code=code)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.sadd(self.keys.paired(self.platform), request.user_id)
            pipe.delete(self.keys.pairing_pending(self.platform, request.user_id))
            pipe.lrem(self.keys.pairing_queue(self.platform), 0, code)
            await pipe.execute()
        return request

    async def paired(self) -> list[str]:
        members = await self.redis.smembers(self.keys.paired(self.platform))
        return sorted(as_text(m) for m in members)

    async def revoke(self, user_id: str) -> bool:
        return bool(await self.redis.srem(self.keys.paired(self.platform), user_id))

    async def _request(self, code: str) -> Request | None:
        raw = await self.redis.get(self.keys.pairing_code(code))
        return None if raw is None else replace(RECORD.decode(raw), code=code)
