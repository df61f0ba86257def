"""Standing approvals in the conversation: **Always for this tool** on an approval prompt.

Only the requester gives one, for themselves: an approver's press for someone else's run is
refused (Approve still runs it that once), and a press on a prompt that offered no such
button is not understood. Once given, it is said in the chat, and so is every later call it
lets run without asking — nothing runs unseen. The executor stores it as the run resumes
(bot/features/standing.py).
"""

from __future__ import annotations

from adapters.base import Addressing, InboundAction, OutboundMessage
from adapters.traits import mention
from agent.outcomes import Outcome
from bot.conversation.effects import Claim, Effect, GrantStanding, Notify, Resume, Send
from bot.conversation.render import standing_tools
from bot.conversation.texts import (
    ALWAYS_GRANTED,
    ALWAYS_RAN,
    ALWAYS_TOAST,
    NOT_YOURS_FOR_GOOD,
    UNKNOWN_BUTTON,
)
from bot.runtime.decisions import Decision
from bot.runtime.sessions import Resolution, Session


def pressed(session: Session, decision: Decision, event: InboundAction, by: str) -> list[Effect]:
    """**Always** pressed by one who may decide."""
    if not grantable(session):  # no such button was offered
        return [Notify(text=UNKNOWN_BUTTON, alert=True)]
    if event.actor.user_id != decision.requester_id:  # an approver, for someone else
        return [Notify(text=NOT_YOURS_FOR_GOOD.format(who=_requester(decision)), alert=True)]
    return [Claim(decision_id=decision.id, status="approved", by=by)]


def granted(
    session: Session, decided: Decision, entry_id: str, addressing: Addressing, everywhere: bool
) -> list[Effect]:
    """Claimed: said in the chat, then the run goes on (storing the approval first)."""
    who = _requester(decided)
    line = ALWAYS_GRANTED.format(
        tools=", ".join(f"`{tool}`" for tool, _ in grantable(session)),
        who=who,
        where="" if everywhere else "in this chat ",
        command=addressing.shown("connections"),
    )
    said = OutboundMessage(text=line, allowed_mentions=frozenset({who}))
    resolution = Resolution(entry_id=entry_id, approved=True, standing=True)
    return [
        Notify(text=ALWAYS_TOAST),
        Send(message=said, slot="standing"),
        *grant(session),
        Resume(resolution=resolution),
    ]


def grant(session: Session) -> list[Effect]:
    """Store the pending plan's tools for good (as its prompt showed them), if it has any."""
    tools = grantable(session)
    return [GrantStanding(tools=tuple(tools))] if tools else []


def ran(outcome: Outcome, addressing: Addressing) -> list[Effect]:
    """The calls a run made under a standing approval, said in the chat."""
    tools = list(dict.fromkeys(outcome.trace.standing))
    if not tools:
        return []
    context = outcome.state.context
    who = mention(context.platform, context.user_id, context.user_name)
    line = ALWAYS_RAN.format(
        tools=", ".join(f"`{tool}`" for tool in tools),
        who=who,
        command=addressing.shown("connections"),
    )
    message = OutboundMessage(text=line, allowed_mentions=frozenset({who}))
    return [Send(message=message, slot="standing-ran")]


def grantable(session: Session) -> list[tuple[str, str]]:
    """The (tool, digest) pairs the pending plan may be approved for good with, if any."""
    pending = session.state.pending_plan if session.state is not None else None
    if pending is None:
        return []
    plan = pending.plan()
    return standing_tools(plan.steps, plan.uncertain)


def _requester(decision: Decision) -> str:
    platform = decision.conversation_id.split(":", 1)[0]
    return mention(platform, decision.requester_id, decision.requester_name)
