"""A circuit breaker whose state lives in Redis, so every worker process agrees on it.

    closed ──a failure──▶ closed, suspect (one probe at a time; the rest use the fallback)
    suspect ──probe succeeds──▶ closed;  ──N failures, or 429/529 with retry-after,
                                            or 401/403──▶ open
    open ──cooldown over──▶ half-open (exactly one probe request goes through)
    half-open ──probe succeeds──▶ closed;  ──probe fails──▶ open (longer cooldown)

A call that has been waiting past the suspicion threshold with no answer from the provider
marks the breaker suspect too (`suspect`), so a hanging provider holds one request for its
timeout rather than every request that arrives meanwhile. Cooldowns double on each
consecutive trip up to a maximum; a retry-after from the provider is honoured as the
cooldown. Each transition is one Lua script, atomic across processes. While Redis is
unreachable the breaker lets every call through (it fails open): a run should not fail
because the breaker's memory is away, and each call still falls back on its own.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Literal

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent.llm import metrics

log = logging.getLogger(__name__)

# "clean": closed with no failure counted, so a success has nothing to reset in Redis.
# "probing": another request is the one probe allowed out; use the fallback.
Admission = Literal["clean", "probe", "probing", "open"]
_STATE_VALUE = {"closed": 0, "half_open": 1, "open": 2}
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
_TRUST_OPEN = 5.0  # seconds an open breaker is believed without asking Redis again
# Seconds a clean breaker is believed: a round trip saved per model call, at the price of
# noticing another process's suspicion up to this much later.
_TRUST_CLEAN = 1.0

# KEYS[1] hash; ARGV: now, probe_timeout, ttl_ms
_ACQUIRE = """
local h = redis.call('hmget', KEYS[1], 'state', 'failures', 'open_until', 'probe_until')
local state = h[1] or 'closed'
local now = tonumber(ARGV[1])
if state == 'open' then
  if now < tonumber(h[3] or '0') then return 'open:' .. h[3] end
  state = 'half_open'
elseif now < tonumber(h[4] or '0') then
  return 'probing'
elseif state == 'closed' and tonumber(h[2] or '0') == 0 then
  return 'clean'
end
redis.call('hset', KEYS[1], 'state', state, 'probe_until', now + tonumber(ARGV[2]))
redis.call('pexpire', KEYS[1], ARGV[3])
if state == 'half_open' then return 'half_open' end
return 'probe'
"""

# A request outstanding past the suspicion threshold becomes the probe unless one is out.
# ARGV: now, probe_until, ttl_ms; returns 1 when the caller is now the probe
_SUSPECT = """
local h = redis.call('hmget', KEYS[1], 'state', 'probe_until')
if (h[1] or 'closed') ~= 'closed' or tonumber(ARGV[1]) < tonumber(h[2] or '0') then
  return 0
end
redis.call('hset', KEYS[1], 'state', 'closed', 'probe_until', ARGV[2])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
"""

# returns the previous state
_SUCCESS = """
local state = redis.call('hget', KEYS[1], 'state') or 'closed'
redis.call('hset', KEYS[1], 'state', 'closed', 'failures', 0, 'trips', 0, 'probe_until', 0)
redis.call('pexpire', KEYS[1], ARGV[1])
return state
"""

# ARGV: now, threshold, base, max, override (-1: none), ttl_ms; returns {state, cooldown}
_FAILURE = """
local state = redis.call('hget', KEYS[1], 'state') or 'closed'
local now = tonumber(ARGV[1])
local failures = redis.call('hincrby', KEYS[1], 'failures', 1)
local override = tonumber(ARGV[5])
redis.call('pexpire', KEYS[1], ARGV[6])
if state == 'open' and now < tonumber(redis.call('hget', KEYS[1], 'open_until') or '0') then
  return {'open', '0'}
end
if state ~= 'half_open' and override < 0 and failures < tonumber(ARGV[2]) then
  redis.call('hset', KEYS[1], 'probe_until', 0)  -- the next request may probe
  return {state, '0'}
end
local trips = redis.call('hincrby', KEYS[1], 'trips', 1)
local cooldown = override
if cooldown < 0 then
  cooldown = math.min(tonumber(ARGV[3]) * 2 ^ (trips - 1), tonumber(ARGV[4]))
end
redis.call('hset', KEYS[1], 'state', 'open', 'open_until', now + cooldown, 'failures', 0,
  'probe_until', 0)
return {'open', tostring(cooldown)}
"""


@dataclass(frozen=True, kw_only=True)
class BreakerPolicy:
    failures: int = 3
    cooldown: float = 30.0
    max_cooldown: float = 600.0
    auth_cooldown: float = 3600.0
    probe_timeout: float = 60.0  # a probe that never reports back frees the probe slot


class CircuitBreaker:
    def __init__(
        self, redis: aioredis.Redis, key: str, provider: str, policy: BreakerPolicy
    ) -> None:
        self.key = key
        self.provider = provider
        self.policy = policy
        self.ttl_ms = int(max(policy.auth_cooldown, policy.max_cooldown, 86_400) * 1000)
        self._acquire = redis.register_script(_ACQUIRE)
        self._suspect = redis.register_script(_SUSPECT)
        self._success = redis.register_script(_SUCCESS)
        self._failure = redis.register_script(_FAILURE)
        self.redis = redis
        self._open_until = 0.0
        self._clean_until = 0.0

    async def admit(self) -> Admission:
        now = time.time()
        if now < self._clean_until:
            return "clean"
        if now < self._open_until:
            return "open"  # known open: no round trip while the provider is out
        try:
            result = await self._acquire(
                keys=[self.key], args=[now, self.policy.probe_timeout, self.ttl_ms]
            )
        except _UNREACHABLE:
            log.debug("breaker state unreachable; letting the call to %s through", self.provider)
            return "clean"
        admission = _text(result)
        if admission.startswith("open:"):
            # Nothing closes an open breaker before its cooldown ends; re-read now and then
            # all the same, so an operator's reset is seen.
            self._open_until = min(float(admission[5:]), now + _TRUST_OPEN)
            return "open"
        if admission == "clean":
            self._clean_until = now + _TRUST_CLEAN
        if admission == "half_open":
            self._transition("half_open", "cooldown over; probing %s")
            return "probe"
        return admission  # type: ignore[return-value]

    async def suspect(self, for_seconds: float) -> bool:
        """Whether the caller, silent past the threshold, is now the one probe allowed out."""
        now = time.time()
        self._clean_until = 0.0
        try:
            became = await self._suspect(
                keys=[self.key], args=[now, now + for_seconds, self.ttl_ms]
            )
        except _UNREACHABLE:
            return True  # no shared memory to ask: keep waiting for this call's own answer
        if became:
            log.warning(
                "%s is not answering; one request waits, the rest use the fallback", self.provider
            )
        return bool(became)

    async def record_success(self, admission: Admission = "probe") -> None:
        if admission == "clean":
            return  # one round trip saved on the common path
        try:
            previous = _text(await self._success(keys=[self.key], args=[self.ttl_ms]))
        except _UNREACHABLE:
            log.debug("breaker state unreachable; success of %s not recorded", self.provider)
            return
        if previous != "closed":
            self._transition("closed", "%s answered; breaker closed")
        else:
            log.info("%s answered; back in use", self.provider)

    async def record_failure(self, *, cooldown: float | None = None) -> None:
        """Count a failure; `cooldown` opens the breaker at once for that long."""
        self._clean_until = 0.0
        override = -1.0 if cooldown is None else min(cooldown, self.policy.auth_cooldown)
        try:
            state, opened_for = await self._failure(
                keys=[self.key],
                args=[
                    time.time(),
                    self.policy.failures,
                    self.policy.cooldown,
                    self.policy.max_cooldown,
                    override,
                    self.ttl_ms,
                ],
            )
        except _UNREACHABLE:
            log.debug("breaker state unreachable; failure of %s not recorded", self.provider)
            return
        seconds = float(_text(opened_for))
        if _text(state) == "open" and seconds > 0:
            self._transition("open", f"%s failing; breaker open for {seconds:.0f} s")

    async def state(self) -> str:
        value = await self.redis.hget(self.key, "state")
        return _text(value) if value else "closed"

    def _transition(self, to: str, message: str) -> None:
        metrics.BREAKER_STATE.labels(self.provider).set(_STATE_VALUE[to])
        metrics.BREAKER_TRANSITIONS.labels(self.provider, to).inc()
        log.warning(message, self.provider)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
