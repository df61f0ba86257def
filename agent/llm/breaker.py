"""A circuit breaker in front of the hosted provider, over a state it may share.

    closed ──a failure──▶ closed, suspect (one probe at a time; the rest use the fallback)
    suspect ──probe succeeds──▶ closed;  ──N failures, or 429/529 with retry-after,
                                            or 401/403──▶ open
    open ──cooldown over──▶ half-open (exactly one probe request goes through)
    half-open ──probe succeeds──▶ closed;  ──probe fails──▶ open (longer cooldown)

A call that has been waiting past the suspicion threshold with no answer from the provider
marks the breaker suspect too (`suspect`), so a hanging provider holds one request for its
timeout rather than every request that arrives meanwhile. Cooldowns double on each
consecutive trip up to a maximum; a retry-after from the provider is honoured as the
cooldown.

Each transition is one atomic step of a `BreakerState`: `LocalBreakerState` keeps it in this
process (the default, for an embedded agent); `breaker_redis.RedisBreakerState` keeps it in
Redis, so every worker process agrees on it. While the state is unreachable the breaker lets
every call through (it fails open): a run should not fail because the breaker's memory is
away, and each call still falls back on its own.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Literal, Protocol

from agent.llm import metrics
from loops import exponential

log = logging.getLogger(__name__)

# "clean": closed with no failure counted, so a success has nothing to reset.
# "probing": another request is the one probe allowed out; use the fallback.
Admission = Literal["clean", "probe", "probing", "open"]
# what a state answers to `acquire`: "half_open" is a probe after a cooldown
Acquired = Literal["clean", "probe", "probing", "open", "half_open"]
_STATE_VALUE = {"closed": 0, "half_open": 1, "open": 2}
# Why a call went to the fallback, as operators read it (`parley breaker`, `/readyz`).
FALLBACK_REASONS = {
    "breaker_open": "the breaker was open",
    "probing": "after a failure, another request was probing the hosted model",
    "suspect": "the hosted model was slow to answer while another request probed it",
    "probe_silent": "the probe of a failed hosted model went silent",
    "auth": "the hosted model refused our credentials",
    "unavailable": "the hosted model was unavailable",
    "timeout": "the hosted model timed out",
    "cut": "the hosted model's stream broke midway",
}
_TRUST_OPEN = 5.0  # seconds an open breaker is believed without asking the state again
# Seconds a clean breaker is believed: a round trip saved per model call, at the price of
# noticing another process's suspicion up to this much later.
_TRUST_CLEAN = 1.0


@dataclass(frozen=True, kw_only=True)
class BreakerPolicy:
    failures: int = 3
    cooldown: float = 30.0
    max_cooldown: float = 600.0
    auth_cooldown: float = 3600.0
    probe_timeout: float = 60.0  # a probe that never reports back frees the probe slot


class StateUnavailable(Exception):
    """The breaker's state cannot be reached (its Redis is away): fail open."""


class BreakerState(Protocol):
    """The breaker's memory; each method is one atomic transition (times are epoch seconds)."""

    async def acquire(self, now: float, probe_timeout: float) -> tuple[Acquired, float]:
        """Admit a call: what it may do, and for "open" until when the breaker stays open.
        A call admitted as a probe holds the probe slot until `now + probe_timeout`."""
        ...

    async def suspect(self, now: float, probe_until: float) -> bool:
        """Make a silent call the probe unless one is out or the breaker is not closed."""
        ...

    async def succeed(self) -> str:
        """Close the breaker and forget its failures; returns the state it was in."""
        ...

    async def fail(
        self, now: float, policy: BreakerPolicy, cooldown: float | None, reason: str = ""
    ) -> float:
        """Count a failure (`reason`: why, kept for operators); `cooldown` opens at once for
        that long. Returns how long this failure opened the breaker for (0 when it did not)."""
        ...

    async def fell_back(self, now: float, reason: str) -> None:
        """Remember that a call went to the fallback, and why (for operators)."""
        ...


class LocalBreakerState:
    """A `BreakerState` in this process's memory: for an agent running on its own."""

    def __init__(self) -> None:
        self.state = "closed"
        self.failures = 0
        self.trips = 0
        self.open_until = 0.0
        self.probe_until = 0.0
        self.fallback: tuple[float, str] | None = None  # when and why, the latest

    async def acquire(self, now: float, probe_timeout: float) -> tuple[Acquired, float]:
        if self.state == "open":
            if now < self.open_until:
                return "open", self.open_until
            self.state = "half_open"
        elif now < self.probe_until:
            return "probing", 0.0
        elif self.state == "closed" and self.failures == 0:
            return "clean", 0.0
        self.probe_until = now + probe_timeout
        return ("half_open" if self.state == "half_open" else "probe"), 0.0

    async def suspect(self, now: float, probe_until: float) -> bool:
        if self.state != "closed" or now < self.probe_until:
            return False
        self.probe_until = probe_until
        return True

    async def succeed(self) -> str:
        previous = self.state
        self.state, self.failures, self.trips, self.probe_until = "closed", 0, 0, 0.0
        return previous

    async def fail(
        self, now: float, policy: BreakerPolicy, cooldown: float | None, reason: str = ""
    ) -> float:
        self.failures += 1
        if self.state == "open" and now < self.open_until:
            return 0.0
        if self.state != "half_open" and cooldown is None and self.failures < policy.failures:
            self.probe_until = 0.0  # the next request may probe
            return 0.0
        self.trips += 1
        if cooldown is None:
            cooldown = exponential(policy.cooldown, policy.max_cooldown, self.trips - 1)
        self.state, self.open_until, self.failures, self.probe_until = "open", now + cooldown, 0, 0
        return cooldown

    async def fell_back(self, now: float, reason: str) -> None:
        self.fallback = (now, reason)


class CircuitBreaker:
    def __init__(
        self,
        provider: str,
        policy: BreakerPolicy | None = None,
        *,
        state: BreakerState | None = None,
    ) -> None:
        self.provider = provider
        self.policy = policy or BreakerPolicy()
        self.store = state if state is not None else LocalBreakerState()
        self._open_until = 0.0
        self._clean_until = 0.0

    async def admit(self) -> Admission:
        now = time.time()
        if now < self._clean_until:
            return "clean"
        if now < self._open_until:
            return "open"  # known open: no round trip while the provider is out
        try:
            admission, open_until = await self.store.acquire(now, self.policy.probe_timeout)
        except StateUnavailable:
            log.debug("breaker state unreachable; letting the call to %s through", self.provider)
            return "clean"
        if admission == "open":
            # Nothing closes an open breaker before its cooldown ends; re-read now and then
            # all the same, so an operator's reset is seen.
            self._open_until = min(open_until, now + _TRUST_OPEN)
            return "open"
        if admission == "clean":
            self._clean_until = now + _TRUST_CLEAN
        if admission == "half_open":
            self._transition("half_open", "cooldown over; probing %s")
            return "probe"
        return admission

    async def suspect(self, for_seconds: float) -> bool:
        """Whether the caller, silent past the threshold, is now the one probe allowed out."""
        now = time.time()
        self._clean_until = 0.0
        try:
            became = await self.store.suspect(now, now + for_seconds)
        except StateUnavailable:
            return True  # no shared memory to ask: keep waiting for this call's own answer
        if became:
            log.warning(
                "%s is not answering; one request waits, the rest use the fallback", self.provider
            )
        return became

    async def record_success(self, admission: Admission = "probe") -> None:
        if admission == "clean":
            return  # one round trip saved on the common path
        try:
            previous = await self.store.succeed()
        except StateUnavailable:
            log.debug("breaker state unreachable; success of %s not recorded", self.provider)
            return
        if previous != "closed":
            self._transition("closed", "%s answered; breaker closed")
        else:
            log.info("%s answered; back in use", self.provider)

    async def record_failure(self, *, cooldown: float | None = None, reason: str = "") -> None:
        """Count a failure; `cooldown` opens the breaker at once for that long; `reason` is
        kept with the state for operators (`parley doctor`, `/readyz`)."""
        self._clean_until = 0.0
        if cooldown is not None:
            cooldown = min(cooldown, self.policy.auth_cooldown)
        try:
            seconds = await self.store.fail(time.time(), self.policy, cooldown, reason)
        except StateUnavailable:
            log.debug("breaker state unreachable; failure of %s not recorded", self.provider)
            return
        if seconds > 0:
            self._transition("open", f"%s failing; breaker open for {seconds:.0f} s")

    async def record_fallback(self, reason: str) -> None:
        """A call went to the fallback (`reason`: `FALLBACK_REASONS`' key): counted in the
        metrics and kept with the state, so operators see when and why."""
        now = time.time()
        metrics.FALLBACKS.labels(reason).inc()
        metrics.FALLBACK_LAST.labels(reason).set(now)
        try:
            await self.store.fell_back(now, reason)
        except StateUnavailable:
            log.debug("breaker state unreachable; fallback of %s not recorded", self.provider)

    def _transition(self, to: str, message: str) -> None:
        metrics.BREAKER_STATE.labels(self.provider).set(_STATE_VALUE[to])
        metrics.BREAKER_TRANSITIONS.labels(self.provider, to).inc()
        log.warning(message, self.provider)
