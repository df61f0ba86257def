"""Where each platform agent session lives (Slack's agent sessions), kept in Redis.

A Slack agent session is a thread; in a DM it is either a real thread (the conversation's
thread) or the top-level message that asked (a conversation without a thread). Two things
need that link after the process that opened the session is gone: the native stop button,
which names only the DM and the session's thread (`agent_session_stopped`) and may reach
another gateway or one started since, and the status of a top-level DM run resumed by a
button press, which names only the conversation. Both are written when a run's session
begins and live as long as a conversation's session (`PARLEY_SESSION_TTL`).

Only a nicety rides on it: with Redis away the adapter falls back to what its process saw.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from adapters.base import ConversationKey
from bot.runtime.codec import as_text
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

NO_THREAD = "-"


class RedisSessionDirectory:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)

    async def began(self, conversation: ConversationKey, session_ts: str) -> None:
        """`conversation`'s run is the agent session at thread `session_ts` of its chat."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(
                    self.keys.agent_session(_session_id(conversation, session_ts)),
                    conversation.thread_id or NO_THREAD,
                    px=self.ttl_ms,
                )
                pipe.set(self.keys.session_anchor(conversation.id), session_ts, px=self.ttl_ms)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            log.info("agent session not recorded (%s)", type(exc).__name__)

    async def created(self, conversation: ConversationKey, session_ts: str) -> bool | None:
        """Whether this call created the session at thread `session_ts` (None: unknown)."""
        try:
            fresh = await self.redis.set(
                self.keys.agent_session_created(_session_id(conversation, session_ts)),
                "1",
                nx=True,
                px=self.ttl_ms,
            )
        except (RedisError, OSError) as exc:
            log.info("agent session not recorded (%s)", type(exc).__name__)
            return None
        return bool(fresh)

    async def session_of(self, conversation: ConversationKey) -> str | None:
        """The thread of `conversation`'s newest agent session, if one was recorded."""
        try:
            raw = await self.redis.get(self.keys.session_anchor(conversation.id))
        except (RedisError, OSError) as exc:
            log.info("agent session not read (%s)", type(exc).__name__)
            return None
        return as_text(raw)

    async def thread_of(self, session: ConversationKey) -> tuple[bool, str | None]:
        """For an agent session (`session.thread_id`: its thread): whether it is known, and
        the thread of the conversation it belongs to (None: the chat itself)."""
        assert session.thread_id is not None
        try:
            raw = await self.redis.get(
                self.keys.agent_session(_session_id(session, session.thread_id))
            )
        except (RedisError, OSError) as exc:
            log.info("agent session not read (%s)", type(exc).__name__)
            return False, None
        thread = as_text(raw)
        if thread is None:
            return False, None
        return True, None if thread == NO_THREAD else thread


def _session_id(conversation: ConversationKey, session_ts: str) -> str:
    return ConversationKey(
        platform=conversation.platform,
        chat_id=conversation.chat_id,
        thread_id=session_ts,
        team_id=conversation.team_id,
    ).id
