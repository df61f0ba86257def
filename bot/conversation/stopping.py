"""Which stop requests may end a run: the rule beside the engine's, for `bot/runtime/stops.py`.

A run is watched while it works; a later stop request from its requester, or in a shared
chat from an approver (`permissions.may_act`), sets the event the agent checks at its step
boundaries (`agent/stopping.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from adapters.base import Inbound, InboundMessage, OutboundMessage
from adapters.traits import mention
from agent.outcomes import Failed, Outcome
from agent.protocols import ProgressEvent
from bot.conversation import effects as fx
from bot.conversation.seam import Acting, Handler
from bot.conversation.texts import (
    ALREADY_DONE,
    NOT_YOURS_TO_STOP,
)
from bot.features.followed_tasks import TaskFollowing
from bot.runtime.permissions import may_act
from bot.runtime.sessions import Session, entry_order
from bot.runtime.stops import StopRequest, Stops, Watch

# An agent call, given where its progress goes and the event that stops it.
Stoppable = Callable[
    [Callable[[ProgressEvent], Awaitable[None]], asyncio.Event | None], Awaitable[Outcome]
]


def watching(
    stops: Stops | None,
    event: Inbound,
    entry_id: str,
    requester: str,
    approvers: frozenset[str],
) -> contextlib.AbstractContextManager[Watch | None]:
    """While a run begun with `entry_id` works, a stop request that may end it sets its event."""
    if stops is None:
        return contextlib.nullcontext()

    def allows(request: StopRequest) -> bool:
        return may_act(request.user_id, request.groups, requester, event.is_direct, approvers)

    return stops.watching(event.conversation.id, entry_id, allows)


def stopped(outcome: Outcome) -> bool:
    return isinstance(outcome, Failed) and outcome.reason == "stopped"


def late_stop(
    session: Session, event: InboundMessage, entry_id: str, approvers: frozenset[str]
) -> OutboundMessage | None:
    """What a /cancel sent while a run worked, but handled after it, is told: the run ended
    first (entry ids carry the time they were sent; the session's save, when the run ended)."""
    state = session.state
    if state is None or entry_order(entry_id)[0] >= session.updated_at * 1000:
        return None  # sent after the run ended: nothing was running
    context = state.context
    actor = event.actor
    if may_act(actor.user_id, actor.groups, context.user_id, context.is_direct, approvers):
        return OutboundMessage(text=ALREADY_DONE)
    who = mention(event.conversation.platform, context.user_id, context.user_name)
    return OutboundMessage(
        text=NOT_YOURS_TO_STOP.format(who=who), allowed_mentions=frozenset({who})
    )


@dataclass(frozen=True)
class TaskStops:
    """A stop also stops the conversation's followed MCP tasks (`CancelTasks`): those of
    whoever the person may act for (`permissions.may_act`, as for a run)."""

    tasks: TaskFollowing
    approvers: frozenset[str] = frozenset()

    def handlers(self) -> Mapping[type, Handler]:
        return {fx.CancelTasks: self._cancel}

    async def _cancel(self, acting: Acting, effect: fx.CancelTasks) -> fx.TasksCancelled:
        event = effect.received.event
        actor, direct = event.actor, event.is_direct

        def may_stop(requester: str) -> bool:
            return may_act(actor.user_id, actor.groups, requester, direct, self.approvers)

        count = await self.tasks.cancel(event.conversation.id, may_stop)
        return fx.TasksCancelled(received=effect.received, count=count)
