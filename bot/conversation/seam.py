"""Where a feature plugs into the executor: the effects it brings and how each is carried out.

The executor carries out the core effects (sends, runs, decisions, the session). A feature's
own effects (`effects.FeatureEffect`: /schedules, /connections, a stop's followed tasks, an
"Always" approval stored, a voice note heard, Parley's own run checked and counted) reach it
through a `Feature`: an object whose `handlers()` maps
each effect type it brings to a coroutine. A new feature adds its effect, its rule in
`decide` and a feature object handed to the executor by wiring; the executor gains no field,
import or match case for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.base import Inbound
from bot.conversation import effects as fx
from bot.conversation.running import Reply
from bot.runtime.sessions import Session


@dataclass(frozen=True, kw_only=True)
class Acting:
    """What a feature's handler gets of the inbox entry being handled."""

    received: fx.Received
    session: Session
    reply: Reply
    # answer the press this entry is (a toast, or an alert), a failure costing only that
    notify: Callable[[str, bool], Awaitable[None]]
    # queue an event for another conversation (False when it could not be queued)
    forward: Callable[[Inbound], Awaitable[bool]] | None = None

    @property
    def event(self) -> Inbound:
        return self.received.event


Handler = Callable[[Acting, Any], Awaitable[fx.Event | None]]


class Feature(Protocol):
    def handlers(self) -> Mapping[type, Handler]:
        """Each effect type this feature brings, and the coroutine that carries it out (an
        event it returns goes back to `decide`, as an answered effect's does)."""
        ...


def registry(features: Iterable[Feature]) -> dict[type, Handler]:
    """One handler per effect type; two features claiming one effect is a wiring mistake."""
    found: dict[type, Handler] = {}
    for feature in features:
        for kind, handler in feature.handlers().items():
            if kind in found:
                raise ValueError(f"two features carry out {kind.__name__}")
            found[kind] = handler
    return found
