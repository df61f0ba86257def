"""Standing approvals: a person's "Always for this tool", kept in Redis.

One hash per person (`standing:<platform>:<user>`), a field per approval: which tool, the
digest of the tool as it was shown when approved (`Tool.standing_digest`), where it holds
(the chat it was given in, without the thread, or `*` with
`PARLEY_STANDING_APPROVAL_SCOPE=everywhere`) and when it ends (`PARLEY_STANDING_APPROVAL_TTL`
after it was given). The hash expires with its newest approval. Only the requester's own
approvals are ever read for their run, so one person's never covers another's request, and
only for a run they asked for and watch: a trigger acting in their name (`RunContext.asked`)
and a schedule's slot (`RunContext.unattended`) are asked, a schedule's slot unless the
schedule was approved with that tool (`allow_tools`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis

from agent.protocols import RunContext
from bot.features.schedules.store import chat_of
from bot.runtime.codec import Codec
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

Scope = Literal["conversation", "everywhere"]
EVERYWHERE = "*"


@dataclass(frozen=True, kw_only=True)
class Standing:
    """One approval: `tool` may run without asking while it is as `digest` says."""

    id: str
    tool: str
    digest: str
    where: str  # a chat (`platform:team:chat`) or EVERYWHERE
    expires: float  # epoch seconds


RECORD: Codec[Standing] = Codec(Standing)


def _id(where: str, tool: str) -> str:
    return hashlib.sha256(f"{where}|{tool}".encode()).hexdigest()[:12]


class StandingStore:
    """The `StandingApprovals` of the agent, and the listing and revoking of /connections."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        *,
        ttl: float,
        scope: Scope = "conversation",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl = ttl
        self.scope = scope
        self.clock = clock

    def _places(self, context: RunContext) -> list[str]:
        here = chat_of(context.conversation_id)
        return [here, EVERYWHERE] if self.scope == "everywhere" else [here]

    async def grant(self, context: RunContext, tools: Iterable[tuple[str, str]]) -> list[str]:
        """Approve each (tool, digest) for good for the requester of `context`; the tools."""
        where = self._places(context)[-1]
        expires = self.clock() + self.ttl
        fields: dict[Any, bytes] = {}  # redis-py types its keys invariantly
        for tool, digest in tools:
            found = Standing(
                id=_id(where, tool), tool=tool, digest=digest, where=where, expires=expires
            )
            fields[found.id] = RECORD.encode(found)
        if not fields:
            return []
        key = self.keys.standing(context.platform, context.user_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, int(self.ttl) + 1)  # the newest approval is the last to end
            await pipe.execute()
        granted = [RECORD.decode(value).tool for value in fields.values()]
        log.info("standing approval for %s:%s of %s", context.platform, context.user_id, granted)
        return granted

    async def covers(self, context: RunContext, tool: str, digest: str) -> bool:
        if not context.asked or context.unattended:
            # a trigger in their name (its body may say anything), or a schedule's slot:
            # nobody watches those, so only what the schedule itself was granted holds
            return False
        key = self.keys.standing(context.platform, context.user_id)
        ids = [_id(where, tool) for where in self._places(context)]
        for raw in await self.redis.hmget(key, ids):
            if raw is None:
                continue
            found = RECORD.decode(raw)
            if found.tool == tool and found.digest == digest and found.expires > self.clock():
                return True
        return False

    async def of(self, platform: str, user_id: str) -> list[Standing]:
        """A person's approvals still in force, by tool."""
        raw = await self.redis.hgetall(self.keys.standing(platform, user_id))
        now = self.clock()
        found = [RECORD.decode(value) for value in raw.values()]
        return sorted((s for s in found if s.expires > now), key=lambda s: (s.tool, s.where))

    async def revoke(self, platform: str, user_id: str, standing_id: str) -> Standing | None:
        """Take back one of a person's approvals; None when they hold none by that id."""
        key = self.keys.standing(platform, user_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(key, standing_id)
            pipe.hdel(key, standing_id)
            raw, _ = await pipe.execute()
        return RECORD.decode(raw) if raw is not None else None
