"""Parley's own objectives, checked when they run: a schedule's slot, a webhook trigger.

A scheduled slot runs only while its schedule exists and is active (so cancelling stops a
slot already queued), and only while its owner may still use Parley there, checked with the
platform at every slot (the allowlists, the account, the chat's members): otherwise the
schedule pauses and says so, once; when the platform cannot tell, the slot is skipped and
said so. What the model reads first — which schedule this is, that
it is late, the trigger's body as untrusted data — comes before the objective in the user's
turn; the answer's first line says which schedule posted it.

`Objectives` is a feature of the executor (seam.py): it carries out `CheckOwn` (answered
with `OwnChecked`, which `decide` turns into what is said and the run) and counts each own
run by its outcome (`OwnRan`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from adapters.base import Addressing, InboundMessage
from agent.messages import ContentBlock, TextBlock
from agent.observations import clean
from agent.recurrence import local_time, zone_of
from bot.conversation.effects import CheckOwn, OwnChecked, OwnRan
from bot.conversation.seam import Acting, Handler
from bot.conversation.texts import (
    OWNER_LEFT,
    OWNER_NOT_ALLOWED,
    OWNER_NOT_MEMBER,
    PREFACE,
    SCHEDULE_HEADER,
    SCHEDULE_LATE,
    SCHEDULE_PAUSED,
    SCHEDULE_UNCHECKED,
    TRIGGER_HEADER,
    TRIGGER_PREFACE,
)
from bot.features.schedules.clock import slot_of
from bot.features.schedules.store import Schedule, ScheduleStore
from bot.ops import metrics
from bot.runtime.keys import trigger_of

log = logging.getLogger(__name__)

BODY_LIMIT = 16_000  # characters of a webhook body the model reads

# Whether a schedule's owner may still use Parley in its conversation (the allowlists).
OwnerAllowed = Callable[[Schedule], Awaitable[bool]]
# Whether the platform says the owner left (a deactivated Slack account); False when unsure.
OwnerLeft = Callable[[Schedule], Awaitable[bool]]
# Whether the owner (and Parley) are still in the schedule's chat, as the platform says at
# the slot (Slack's conversations.members, Telegram's getChatMember); None: it could not tell.
OwnerMember = Callable[[Schedule], Awaitable[bool | None]]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    go: bool
    say: str | None = None  # said in the conversation either way
    header: str = ""  # the answer's first line
    preface: tuple[ContentBlock, ...] = ()  # before the objective in the user's turn
    standing: tuple[str, ...] = ()


@dataclass(kw_only=True)
class Objectives:
    store: ScheduleStore
    owner_allowed: OwnerAllowed | None = None  # None: every owner passes
    owner_left: OwnerLeft | None = None
    owner_member: OwnerMember | None = None

    def handlers(self) -> Mapping[type, Handler]:
        return {CheckOwn: self._checked, OwnRan: self._counted}

    async def _checked(self, acting: Acting, effect: CheckOwn) -> OwnChecked:
        event = acting.event
        assert isinstance(event, InboundMessage)  # only a message is Parley's own objective
        verdict = await self.check(event, acting.reply.adapter.addressing)
        return OwnChecked(
            received=acting.received,
            go=verdict.go,
            say=verdict.say,
            header=verdict.header,
            preface=verdict.preface,
            standing=verdict.standing,
        )

    async def _counted(self, acting: Acting, effect: OwnRan) -> None:
        metrics.SCHEDULE_RUNS.labels(effect.outcome).inc()

    async def check(self, event: InboundMessage, addressing: Addressing = Addressing()) -> Verdict:
        if event.kind == "triggered":
            return _triggered(event)
        schedule_id, slot = slot_of(event)
        found = await self.store.get(schedule_id)
        if found is None or found.state != "active":
            # Cancelled or paused after this slot was queued: the slot does not run.
            metrics.SCHEDULE_RUNS.labels("cancelled" if found is None else "skipped").inc()
            log.info(
                "slot %s of schedule %s not run: %s",
                slot,
                schedule_id,
                "gone" if found is None else "paused",
            )
            return Verdict(go=False)
        left = self.owner_left is not None and await self.owner_left(found)
        allowed = not left and (self.owner_allowed is None or await self.owner_allowed(found))
        # checked at every slot, never assumed from when it was made: people leave chats
        member = await self.owner_member(found) if allowed and self.owner_member else allowed
        owner = found.owner_name or found.owner_id
        if member is None:
            metrics.SCHEDULE_RUNS.labels("skipped").inc()
            log.info("slot %s of schedule %s not run: membership unknown", slot, schedule_id)
            say = SCHEDULE_UNCHECKED.format(
                id=found.id, objective=found.objective[:80], owner=owner
            )
            return Verdict(go=False, say=say)
        if not member:
            why = OWNER_LEFT if left else OWNER_NOT_ALLOWED if not allowed else OWNER_NOT_MEMBER
            # kept a while for /schedules to show and resume, then gone (its chat may be too)
            await self.store.pause(found, note=f"its owner {why}", orphaned=True)
            metrics.SCHEDULE_RUNS.labels("paused").inc()
            say = SCHEDULE_PAUSED.format(
                id=found.id,
                objective=found.objective[:80],
                owner=owner,
                why=why,
                command=addressing.shown("schedules"),
            )
            return Verdict(go=False, say=say)
        zone = zone_of(found.timezone)
        due = local_time(slot, zone)
        late = event.args == "late"
        preface = PREFACE.format(
            id=found.id,
            when=found.when,
            zone=found.timezone,
            due=due,
            late=" and starts late, after a time Parley was not running" if late else "",
        )
        header = SCHEDULE_HEADER.format(id=found.id, when=found.when) + (
            SCHEDULE_LATE.format(due=due) if late else ""
        )
        return Verdict(
            go=True,
            header=header,
            preface=(TextBlock(text=preface),),
            standing=found.standing,
        )


def _triggered(event: InboundMessage) -> Verdict:
    name = trigger_of(event.event_id)
    body = event.context[0].text if event.context else ""
    preface = TRIGGER_PREFACE.format(name=name, body=clean(body, BODY_LIMIT))
    return Verdict(
        go=True,
        header=TRIGGER_HEADER.format(name=name),
        preface=(TextBlock(text=preface),),
    )
