"""An "Always" approval stored for good (`GrantStanding`): a feature of the executor."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from bot.conversation import effects as fx
from bot.conversation.seam import Acting, Handler
from bot.features.standing import StandingStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StandingGrants:
    store: StandingStore

    def handlers(self) -> Mapping[type, Handler]:
        return {fx.GrantStanding: self._grant}

    async def _grant(self, acting: Acting, effect: fx.GrantStanding) -> None:
        """The requester's "Always" for the plan's tools, as they were shown."""
        state = acting.session.state
        assert state is not None, "granted while a run waits"
        try:
            await self.store.grant(state.context, effect.tools)
        except Exception:  # approved this once all the same; the next call asks again
            log.warning("could not store a standing approval for %s", effect.tools, exc_info=True)
