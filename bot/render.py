"""Agent outcomes and decisions as platform-neutral messages."""

from __future__ import annotations

import re

from adapters.base import Button, Inbound, InboundMessage, OutboundMessage
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Failed, Finished, Outcome
from bot.decisions import Decision

APPROVE, REJECT = "approve", "reject"


def mention(platform: str, user_id: str, name: str) -> str:
    return f"<@{user_id}>" if platform == "slack" else (name or user_id)


_TYPED_MENTION = re.compile(r"<[@!][^<>\s]+>")


def typed_mentions(event: Inbound) -> frozenset[str]:
    """Mentions that may ping in replies to `event`: those its author typed, and the author."""
    typed = _TYPED_MENTION.findall(event.text) if isinstance(event, InboundMessage) else []
    author = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
    return frozenset([*typed, author])


def outcome_message(outcome: Outcome, decision_id: str | None = None) -> OutboundMessage:
    if isinstance(outcome, Finished):
        return OutboundMessage(text=outcome.answer)
    if isinstance(outcome, Failed):
        return OutboundMessage(text=outcome.message)
    if isinstance(outcome, AwaitingAnswer):
        buttons = tuple(
            Button(label=option, value=str(index)) for index, option in enumerate(outcome.options)
        )
        return OutboundMessage(text=outcome.question, buttons=buttons, decision_id=decision_id)
    return approval_message(outcome, decision_id)


def approval_text(outcome: AwaitingApproval) -> str:
    steps = outcome.plan.steps
    lines = [f"**Plan:** {outcome.plan.goal}", ""] if outcome.plan.goal else []
    lines.append(
        "I'd like to do this — may I?" if len(steps) == 1 else "I'd like to do these steps — may I?"
    )
    lines += [f"{index}. {step.description}" for index, step in enumerate(steps, 1)]
    return "\n".join(lines)


def approval_message(outcome: AwaitingApproval, decision_id: str | None) -> OutboundMessage:
    return OutboundMessage(
        text=approval_text(outcome),
        buttons=(
            Button(label="Approve", value=APPROVE, style="primary"),
            Button(label="Reject", value=REJECT, style="danger"),
        ),
        decision_id=decision_id,
    )


def decided_message(decision: Decision) -> OutboundMessage:
    """The decision's message, buttons gone, with what became of it and who decided."""
    who = decision.decided_by
    outcome = {
        "approved": f"✅ Approved by {who}",
        "rejected": f"❌ Rejected by {who}",
        "answered": f"↪ Answered by {who}",
        "cancelled": f"🚫 Cancelled by {who}",
        "expired": "⌛ Expired — ask me again if you still need this.",
    }.get(decision.status, decision.status)
    return OutboundMessage(text=f"{decision.text}\n\n{outcome}", allowed_mentions=frozenset({who}))


def stale_click_text(decision: Decision | None) -> str:
    if decision is None:
        return "This button has expired. Send me your request again if you still need it."
    if decision.status == "expired" or decision.expired():
        return "This request has expired. Ask me again if you still need it."
    who = decision.decided_by
    return {
        "approved": f"This was already approved by {who}.",
        "rejected": f"This was already rejected by {who}.",
        "answered": "This question was already answered.",
        "cancelled": "This request was cancelled.",
    }.get(decision.status, "This request is no longer waiting for a decision.")
