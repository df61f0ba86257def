"""Telegram's unanswered ephemeral prompts, kept as due work until they are offered again.

The adapter puts an offer here when it sends a prompt ephemerally (adapters/telegram/
reoffer.py) and settles it when the prompt is edited (answered, decided, expired). Whichever
worker claims a due offer (`bot/runtime/due.py`: under a lease, an unreadable record dropped
and counted) has the adapter send the copies, then forgets the offer; a worker that dies
mid-way lets the lease run out and another finishes it, skipping the receivers already
offered a copy (`first`: at most one copy each, as the outbox does for messages). Receivers
Telegram did not take a copy for are tried again `RETRY` seconds later, up to `TRIES` passes.
The offer outlives a restart; its copies are kept for the prompt's later edits.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

from adapters.telegram.refs import Placed, read, write
from adapters.telegram.reoffer import Offer
from bot.ops.health import Health
from bot.runtime.codec import as_text
from bot.runtime.due import DueKeys, DueLoop

log = logging.getLogger(__name__)

KEEP = 7 * 86_400.0  # an offer, its copies and whom they went to outlive the due time by this
RETRY = 60.0  # seconds before trying again the receivers Telegram did not take a copy for
TRIES = 30  # passes at most (half an hour of Telegram failing); then the prompt stays as it is


@dataclass(eq=False)
class PromptOffers(DueLoop[Offer]):
    """The Telegram adapter's `OfferStore`, and the loop that offers due prompts again."""

    _: KW_ONLY
    lease: float = 60.0
    # the adapter's sending (Reoffers.offer: how many are left for later), set where both
    # are built
    deliver: Callable[[Offer], Awaitable[int]] | None = field(init=False, default=None)

    def __post_init__(self, health: Health | None) -> None:
        keys = self.keys
        due = DueKeys(due=keys.reoffers_due, claimed=keys.reoffers_claimed, record=keys.reoffer)
        self.due_work(
            due, Offer, kind="prompt re-offer", loop="reoffers", lease=self.lease, health=health
        )

    # --- the adapter's store ------------------------------------------------------------------

    async def put(self, offer: Offer, at: float) -> None:
        ttl = max(at - time.time(), 0.0) + KEEP
        await self.work.put(_member(offer.ref), offer, at, ttl)

    async def settle(self, ref: str) -> list[Placed]:
        member = _member(ref)
        await self.work.done(member)
        found: list[bytes | str] = await self.redis.lrange(self._copies(member), 0, -1)  # type: ignore[misc]
        return [p for raw in found for p in read(as_text(raw))]

    async def first(self, ref: str, person: int) -> bool:
        sent = f"{self.keys.reoffer(_member(ref))}:sent:{person}"
        return bool(await self.redis.set(sent, "1", nx=True, px=int(KEEP * 1000)))

    async def forget(self, ref: str, person: int) -> None:
        await self.redis.delete(f"{self.keys.reoffer(_member(ref))}:sent:{person}")

    async def made(self, ref: str, placed: list[Placed]) -> None:
        copies = self._copies(_member(ref))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(copies, write(placed))
            pipe.pexpire(copies, int(KEEP * 1000))
            await pipe.execute()

    # --- the loop -----------------------------------------------------------------------------

    async def due_pass(self) -> int:
        return await self.offer_due()

    async def offer_due(self, now: float | None = None) -> int:
        """Offer every due prompt again; how many were (some receivers may be left for a
        later pass, when Telegram did not take their copy)."""
        if self.deliver is None:
            return 0
        now = time.time() if now is None else now
        offered = 0
        for member, offer in await self.work.claim(now):
            left = await self.deliver(offer)  # a failure here: the lease runs out, due again
            if left and offer.tries + 1 < TRIES:
                again = offer.model_copy(update={"tries": offer.tries + 1})
                await self.work.put(member, again, now + RETRY, RETRY + KEEP)
                await self.work.again(member, now + RETRY)
            else:
                await self.work.done(member)
            offered += 1
        return offered

    def _copies(self, member: str) -> str:
        return f"{self.keys.reoffer(member)}:copies"


def _member(ref: str) -> str:
    """A prompt's name here: its message id lists every receiver's copy, of any length."""
    return hashlib.sha256(ref.encode()).hexdigest()[:32]
