"""The circuit breaker's state in Redis, so every worker process agrees on it.

One hash per provider; each transition of `breaker.BreakerState` is one Lua script, atomic
across processes. A Redis that cannot be reached is reported as `StateUnavailable`, and the
breaker lets calls through.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent.llm.breaker import (
    Acquired,
    BreakerPolicy,
    CircuitBreaker,
    StateUnavailable,
)

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)

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


class RedisBreakerState:
    """A `BreakerState` in the Redis hash `key`, kept for `ttl` seconds after its last change."""

    def __init__(self, redis: aioredis.Redis, key: str, *, ttl: float = 86_400.0) -> None:
        self.redis = redis
        self.key = key
        self.ttl_ms = int(ttl * 1000)
        self._acquire = redis.register_script(_ACQUIRE)
        self._suspect = redis.register_script(_SUSPECT)
        self._success = redis.register_script(_SUCCESS)
        self._failure = redis.register_script(_FAILURE)

    async def acquire(self, now: float, probe_timeout: float) -> tuple[Acquired, float]:
        try:
            result = _text(
                await self._acquire(keys=[self.key], args=[now, probe_timeout, self.ttl_ms])
            )
        except _UNREACHABLE as exc:
            raise StateUnavailable(self.key) from exc
        if result.startswith("open:"):
            return "open", float(result[5:])
        return result, 0.0  # type: ignore[return-value]

    async def suspect(self, now: float, probe_until: float) -> bool:
        try:
            became = await self._suspect(keys=[self.key], args=[now, probe_until, self.ttl_ms])
        except _UNREACHABLE as exc:
            raise StateUnavailable(self.key) from exc
        return bool(became)

    async def succeed(self) -> str:
        try:
            return _text(await self._success(keys=[self.key], args=[self.ttl_ms]))
        except _UNREACHABLE as exc:
            raise StateUnavailable(self.key) from exc

    async def fail(self, now: float, policy: BreakerPolicy, cooldown: float | None) -> float:
        args = [now, policy.failures, policy.cooldown, policy.max_cooldown]
        override = -1.0 if cooldown is None else cooldown
        try:
            state, opened_for = await self._failure(
                keys=[self.key], args=[*args, override, self.ttl_ms]
            )
        except _UNREACHABLE as exc:
            raise StateUnavailable(self.key) from exc
        return float(_text(opened_for)) if _text(state) == "open" else 0.0


def redis_breaker(
    redis: aioredis.Redis, key: str, provider: str, policy: BreakerPolicy
) -> CircuitBreaker:
    """A breaker shared through Redis, its state kept at least as long as its cooldowns."""
    ttl = max(policy.auth_cooldown, policy.max_cooldown, 86_400)
    return CircuitBreaker(provider, policy, state=RedisBreakerState(redis, key, ttl=ttl))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
