"""The circuit breaker's state in Redis, so every worker process agrees on it.

One hash per provider; each transition of `breaker.BreakerState` is one Lua script, atomic
across processes. A Redis that cannot be reached is reported as `StateUnavailable`, and the
breaker lets calls through.

The state follows the operator: it carries an `identity` (a digest of the key, model and
base URL it was learned with, `identity_of`), and a process that finds another identity there
starts it afresh, so a replaced key or model is tried at once instead of waiting out the
cooldown a revoked key earned. It also keeps why it last failed (`reason`, `failed_at`), for
`parley doctor` and `/readyz` (`status`); `reset` clears it by hand (`parley breaker reset`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent.llm.breaker import (
    FALLBACK_REASONS,
    Acquired,
    BreakerPolicy,
    CircuitBreaker,
    StateUnavailable,
)

log = logging.getLogger(__name__)

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)

# KEYS[1] hash; ARGV: identity, ttl_ms. Another identity's state is dropped: returns the state
# it was in ("" when there was nothing to drop).
_IDENTIFY = """
local old = redis.call('hget', KEYS[1], 'identity')
if old == ARGV[1] then return '' end
local state = ''
if redis.call('exists', KEYS[1]) == 1 then
  state = redis.call('hget', KEYS[1], 'state') or 'closed'
  redis.call('del', KEYS[1])
end
redis.call('hset', KEYS[1], 'identity', ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[2])
return state
"""

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

# ARGV: now, threshold, base, max, override (-1: none), ttl_ms, reason;
# returns {state, cooldown}
_FAILURE = """
local state = redis.call('hget', KEYS[1], 'state') or 'closed'
local now = tonumber(ARGV[1])
local failures = redis.call('hincrby', KEYS[1], 'failures', 1)
redis.call('hset', KEYS[1], 'reason', ARGV[7], 'failed_at', ARGV[1])
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


# ARGV: now, reason, ttl_ms. Kept beside the state, never creating one on its own: a hash
# with only these fields still reads as closed.
_FELL_BACK = """
redis.call('hset', KEYS[1], 'fallback', ARGV[2], 'fallback_at', ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
"""


def identity_of(*parts: str | None) -> str:
    """A digest of what the breaker's state was learned with (key, model, base URL): the
    state never holds the key itself."""
    digest = hashlib.sha256("\0".join(p or "" for p in parts).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class BreakerStatus:
    """What an operator needs to know about a breaker."""

    state: str  # closed, open, half_open
    failures: int = 0
    open_for: float = 0.0  # seconds the breaker stays open from now
    reason: str = ""  # why it last failed
    failed_ago: float | None = None  # seconds since that failure
    identity: str = ""
    probe_for: float = 0.0  # seconds the one probe out may still take; others use the fallback
    fallback: str = ""  # why a call last went to the fallback (`FALLBACK_REASONS`' key)
    fallback_ago: float | None = None  # seconds since then

    def describe(self) -> str:
        if self.state == "open" and self.open_for > 0:
            text = f"open for {self.open_for:.0f} s more: the fallback answers"
        elif self.state in ("open", "half_open"):
            text = "half-open: the next call probes the hosted model"
        elif self.probe_for > 0:
            text = (
                f"closed, probing: one request tests the hosted model (up to {self.probe_for:.0f}"
                " s more); the others go to the fallback meanwhile"
            )
        elif self.failures:
            text = f"closed, {self.failures} recent failure(s): the next call probes"
        else:
            text = "closed"
        if self.reason and (self.failures or self.state != "closed" or self.probe_for > 0):
            ago = f", {self.failed_ago:.0f} s ago" if self.failed_ago is not None else ""
            text += f" (last failure: {self.reason}{ago})"
        if self.fallback and self.fallback_ago is not None:
            why = FALLBACK_REASONS.get(self.fallback, self.fallback)
            text += f"; last answer by the fallback {self.fallback_ago:.0f} s ago: {why}"
        return text


class RedisBreakerState:
    """A `BreakerState` in the Redis hash `key`, kept for `ttl` seconds after its last change;
    with an `identity`, a state learned with another one is dropped before the first use."""

    def __init__(
        self,
        redis: aioredis.Redis,
        key: str,
        *,
        ttl: float = 86_400.0,
        identity: str | None = None,
    ) -> None:
        self.redis = redis
        self.key = key
        self.ttl_ms = int(ttl * 1000)
        self.identity = identity
        self._identified = identity is None
        self._identify = redis.register_script(_IDENTIFY)
        self._acquire = redis.register_script(_ACQUIRE)
        self._suspect = redis.register_script(_SUSPECT)
        self._success = redis.register_script(_SUCCESS)
        self._failure = redis.register_script(_FAILURE)
        self._fell_back = redis.register_script(_FELL_BACK)

    async def identify(self) -> str:
        """Drop a state another key or model left; returns the state dropped ("" if none)."""
        dropped = _text(
            await self._identify(keys=[self.key], args=[self.identity or "", self.ttl_ms])
        )
        self._identified = True
        if dropped:
            log.warning(
                "the hosted model's key or model changed: its circuit breaker (was %s) starts "
                "afresh",
                dropped,
            )
        return dropped

    async def acquire(self, now: float, probe_timeout: float) -> tuple[Acquired, float]:
        try:
            if not self._identified:
                await self.identify()
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

    async def fail(
        self, now: float, policy: BreakerPolicy, cooldown: float | None, reason: str = ""
    ) -> float:
        args = [now, policy.failures, policy.cooldown, policy.max_cooldown]
        override = -1.0 if cooldown is None else cooldown
        try:
            state, opened_for = await self._failure(
                keys=[self.key], args=[*args, override, self.ttl_ms, reason[:200]]
            )
        except _UNREACHABLE as exc:
            raise StateUnavailable(self.key) from exc
        return float(_text(opened_for)) if _text(state) == "open" else 0.0

    async def fell_back(self, now: float, reason: str) -> None:
        try:
            await self._fell_back(keys=[self.key], args=[now, reason[:40], self.ttl_ms])
        except _UNREACHABLE as exc:
            raise StateUnavailable(self.key) from exc

    async def status(self, now: float | None = None) -> BreakerStatus:
        """The state as it is now, for operators (raises Redis's errors)."""
        now = time.time() if now is None else now
        raw = {_text(k): _text(v) for k, v in (await self.redis.hgetall(self.key)).items()}
        failed_at = float(raw["failed_at"]) if raw.get("failed_at") else None
        fallback_at = float(raw["fallback_at"]) if raw.get("fallback_at") else None
        return BreakerStatus(
            probe_for=max(0.0, float(raw.get("probe_until") or 0) - now)
            if raw.get("state", "closed") == "closed"
            else 0.0,
            fallback=raw.get("fallback", ""),
            fallback_ago=None if fallback_at is None else max(0.0, now - fallback_at),
            state=raw.get("state", "closed"),
            failures=int(raw.get("failures") or 0),
            open_for=max(0.0, float(raw.get("open_until") or 0) - now),
            reason=raw.get("reason", ""),
            failed_ago=None if failed_at is None else max(0.0, now - failed_at),
            identity=raw.get("identity", ""),
        )

    async def reset(self) -> BreakerStatus:
        """Forget everything (closed, no failures); returns what was there."""
        before = await self.status()
        await self.redis.delete(self.key)
        return before


def redis_breaker(
    redis: aioredis.Redis,
    key: str,
    provider: str,
    policy: BreakerPolicy,
    *,
    identity: str | None = None,
) -> CircuitBreaker:
    """A breaker shared through Redis, its state kept at least as long as its cooldowns;
    `identity` (`identity_of(key, model, …)`) drops a state learned with other settings."""
    ttl = max(policy.auth_cooldown, policy.max_cooldown, 86_400)
    state = RedisBreakerState(redis, key, ttl=ttl, identity=identity)
    return CircuitBreaker(provider, policy, state=state)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
