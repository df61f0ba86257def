"""Per-user message rate limits and daily token budgets, kept in Redis for every process.

When the global daily budget is spent, nobody's message reaches the model until the next UTC
day: the kill switch that keeps a runaway loop or a flood from running up the bill.

Charges are added up in the process and written at most once a second (and at stop), one
pipeline for all of them: a round trip per objective saved under load, at the price of other
processes seeing this one's spending up to a second late. This process counts its unwritten
charges in its own checks. While Redis is away they are kept (one log line when writing
stops, one when it works again), and at stop the last write is tried until Redis is back or
the time to stop runs out.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

from adapters.base import Inbound, InboundMessage
from agent.messages import Usage
from bot.config import LimitsSettings
from bot.conversation.texts import (
    GLOBAL_BUDGET_SPENT,
    RATE_LIMITED,
    USAGE_TODAY,
    USER_BUDGET_SPENT,
)
from bot.ops import metrics
from bot.ops.health import redis_away

log = logging.getLogger(__name__)


# KEYS[1] log of message times; ARGV: now, window, limit, member
_RATE = """
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1] - ARGV[2])
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[1], ARGV[4])
redis.call('pexpire', KEYS[1], math.ceil(ARGV[2] * 1000))
return 1
"""

DAY = 86_400


@dataclass(frozen=True, kw_only=True)
class Verdict:
    ok: bool
    message: str = ""
    limit: str = ""


@dataclass(frozen=True, kw_only=True)
class UsageToday:
    user: int
    user_budget: int
    everyone: int
    budget: int
    user_cost: float = 0.0  # estimated dollars at the configured prices
    everyone_cost: float = 0.0


def user_key(event: Inbound) -> str:
    """Whose rate and budget an event counts against: the person's.

    On Telegram someone may write as a channel or as the group (`sender_chat`, whose ids are
    negative, a person's never are); who is behind it is hidden, and anyone can own many
    channels. So every such identity in a chat shares that chat's one budget, rather than each
    channel getting a fresh one."""
    actor, chat = event.actor, event.conversation
    if chat.platform == "telegram" and actor.user_id.startswith("-"):
        return f"telegram:chat:{chat.chat_id}"
    return f"{chat.platform}:{actor.user_id}"


class Limits:
    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str,
        settings: LimitsSettings,
        *,
        clock: Callable[[], float] = time.time,
        window: float = 60.0,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.settings = settings
        self.clock = clock
        self.window = window
        self.flush_every = 1.0  # seconds
        self._unwritten: defaultdict[str, float] = defaultdict(float)  # key → tokens or $
        self._written_at = -math.inf
        self._failing = False  # charges could not be written: said once, until they are

    def _day(self) -> str:
        return time.strftime("%Y%m%d", time.gmtime(self.clock()))

    def _usage_key(self, who: str) -> str:
        return f"{self.prefix}:usage:{self._day()}:{who}"

    def _queue_usage(self, pipe: Pipeline, user: str) -> None:
        """Today's tokens for everyone, then for the user (two keys: two slots in a cluster)."""
        pipe.get(self._usage_key("*all*"))
        pipe.get(self._usage_key(user))

    async def admit(self, user: str) -> Verdict:
        now = self.clock()
        # One round trip; a refused message still counts towards the rate, as it was sent.
        async with self.redis.pipeline(transaction=False) as pipe:
            self._queue_usage(pipe, user)
            # EVAL, not a registered script: in a pipeline those cost a SCRIPT EXISTS first.
            pipe.eval(
                _RATE,
                1,
                f"{self.prefix}:rate:{user}",
                now,
                self.window,
                self.settings.messages_per_minute,
                f"{now}:{uuid.uuid4().hex[:6]}",
            )
            everyone, mine, allowed = await pipe.execute()
        everyone = int(everyone or 0) + self._unwritten.get(self._usage_key("*all*"), 0)
        mine = int(mine or 0) + self._unwritten.get(self._usage_key(user), 0)
        if everyone >= self.settings.daily_tokens:
            metrics.LIMITED.labels("global_budget").inc()
            return Verdict(ok=False, message=GLOBAL_BUDGET_SPENT, limit="global_budget")
        if mine >= self.settings.user_daily_tokens:
            metrics.LIMITED.labels("user_budget").inc()
            return Verdict(ok=False, message=USER_BUDGET_SPENT, limit="user_budget")
        if not allowed:
            metrics.LIMITED.labels("rate").inc()
            return Verdict(ok=False, message=RATE_LIMITED, limit="rate")
        return Verdict(ok=True)

    async def charge(self, user: str, tokens: int, cost: float = 0.0) -> None:
        if tokens <= 0:
            return
        for key in (self._usage_key(user), self._usage_key("*all*")):
            self._unwritten[key] += tokens
            if cost > 0:
                self._unwritten[f"{key}:cost"] += cost
        if time.monotonic() - self._written_at >= self.flush_every:
            try:
                await self.flush()
            except Exception as exc:
                if not redis_away(exc):
                    raise
                if not self._failing:  # kept, and written with a later charge
                    log.warning("token charges cannot be written (Redis away); kept for later")
                self._failing = True

    async def flush(self) -> None:
        """Write the charges not yet in Redis, in one round trip."""
        unwritten, self._unwritten = self._unwritten, defaultdict(float)
        self._written_at = time.monotonic()
        if not unwritten:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:  # any slots in a cluster
                for key, amount in unwritten.items():
                    if key.endswith(":cost"):
                        pipe.incrbyfloat(key, amount)
                    else:
                        pipe.incrby(key, int(amount))
                    pipe.expire(key, 2 * DAY)
                await pipe.execute()
        except BaseException:
            for key, amount in unwritten.items():  # kept for the next attempt
                self._unwritten[key] += amount
            raise
        if self._failing:
            self._failing = False
            log.info("token charges are written again")

    async def flush_at_stop(self, within: float) -> bool:
        """The last write, tried again while Redis is away for up to `within` seconds; False
        (and one log line with the tokens lost) if it never got through."""
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(redis_away),
                stop=stop_after_delay(within),
                wait=wait_exponential_jitter(multiplier=0.1, max=1.0),
                reraise=True,
            ):
                with attempt:
                    await self.flush()
        except Exception as exc:
            tokens = self._unwritten.get(self._usage_key("*all*"), 0)
            log.warning(
                "could not write the last token charges (%s); %d tokens not counted",
                type(exc).__name__,
                tokens,
            )
            return False
        return True

    async def usage(self, user: str) -> UsageToday:
        await self.flush()  # /status shows exact figures
        async with self.redis.pipeline(transaction=False) as pipe:
            self._queue_usage(pipe, user)
            pipe.get(f"{self._usage_key('*all*')}:cost")
            pipe.get(f"{self._usage_key(user)}:cost")
            everyone, mine, everyone_cost, my_cost = await pipe.execute()
        return UsageToday(
            user=int(mine or 0),
            user_budget=self.settings.user_daily_tokens,
            everyone=int(everyone or 0),
            budget=self.settings.daily_tokens,
            user_cost=float(my_cost or 0),
            everyone_cost=float(everyone_cost or 0),
        )

    # --- the shapes the executor and commands take ------------------------------------------

    async def admission(self, event: InboundMessage) -> str | None:
        verdict = await self.admit(user_key(event))
        return None if verdict.ok else verdict.message

    async def charge_event(self, event: Inbound, usage: Usage) -> None:
        await self.charge(user_key(event), usage.total, usage.cost)

    async def usage_text(self, event: InboundMessage) -> str:
        today = await self.usage(user_key(event))
        share = 100 * today.user / today.user_budget if today.user_budget else 0
        return USAGE_TODAY.format(
            used=today.user, budget=today.user_budget, share=share, cost=dollars(today.user_cost)
        )


def dollars(amount: float) -> str:
    """Cents for real money, more digits for the small change of a few calls."""
    return f"${amount:,.2f}" if amount >= 1 or amount == 0 else f"${amount:.4f}"
