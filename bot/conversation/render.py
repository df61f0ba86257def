"""Agent outcomes and decisions as platform-neutral messages.

An approval prompt shows what will actually run: each call's tool and arguments, verbatim in
a code block (which every platform escapes, so no mention or link in an argument goes live),
with invisible characters (controls, bidi overrides, line separators, tags) written as
escapes. A long value is folded, never cut: the prompt shows its start and says so, and the
whole value goes in a message of its own just before the prompt (`continuations`). What the
model says about the calls is only a secondary line, defanged, because a prompt-injected
model can describe one thing and call another.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from adapters.base import Addressing, Button, Inbound, InboundMessage, OutboundMessage, ProposedPlan
from adapters.traits import mention
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Failed, Finished, Outcome, PlanStep
from bot.conversation.texts import (
    ALREADY,
    BUTTON_GONE,
    DECIDED,
    FOLDED,
    MAY_I_MANY,
    MAY_I_ONE,
    NO_LONGER_WAITING,
    PRIVATE_UNREACHABLE,
    PROPOSED_PLAN,
    REQUEST_EXPIRED,
    STOPPED_DONE,
    STOPPED_NOT_RUN,
    STOPPED_TEXT,
)
from bot.runtime.decisions import Decision

APPROVE, REJECT = "approve", "reject"
ALWAYS = "always"  # approve, and from now on run these tools without asking (standing)
# The decision id Forget buttons carry; their value is the memory id.
MEMORY_ACTION = "mem"
FOLD_AT = 300  # characters of one argument shown in the prompt; the whole value comes before it
NOTE_LIMIT = 200  # characters of the model's own description of a call or plan


_KEY = re.compile(r"^[\w.-]{1,64}$")
# Slack mentions (<!channel>, <@U1>), @username and @everyone, Markdown links ([x](url))
_LIVE = re.compile(r"<(?=[!@#])|(?<![\w.])@(?=\w)|\](?=\()")
WORD_JOINER = "\u2060"
_FENCE_BREAK = re.compile(r"(?<=`)(?=`)")  # between two backticks: no ``` can end the block


# Slack's mention tokens, and a Telegram `@username`
_TYPED_MENTION = re.compile(r"<[@!][^<>\s]+>|(?<![\w@])@[A-Za-z][A-Za-z0-9_]{4,31}\b")


def typed_mentions(event: Inbound) -> frozenset[str]:
    """Mentions that may ping in replies to `event`: those its author typed, and the author."""
    typed = _TYPED_MENTION.findall(event.text) if isinstance(event, InboundMessage) else []
    author = mention(event.conversation.platform, event.actor.user_id, event.actor.name)
    return frozenset([*typed, author])


def outcome_message(outcome: Outcome, decision_id: str | None = None) -> OutboundMessage:
    private_to = outcome.state.private_to  # what it read is for the requester alone
    if isinstance(outcome, Finished):
        return OutboundMessage(text=outcome.answer, private_to=private_to)
    if isinstance(outcome, Failed):
        text = stopped_text(outcome) if outcome.reason == "stopped" else outcome.message
        return OutboundMessage(text=text, private_to=private_to)
    if isinstance(outcome, AwaitingAnswer) and outcome.link is not None:
        # a Connect link is bound to the requester: shown to them alone
        label, url = outcome.link
        return OutboundMessage(
            text=outcome.question,
            buttons=(Button(label=label, value="", url=url),),
            decision_id=decision_id,
            private_to=outcome.state.context.user_id,
        )
    if isinstance(outcome, AwaitingAnswer):
        buttons = tuple(
            Button(label=option, value=str(index)) for index, option in enumerate(outcome.options)
        )
        return OutboundMessage(text=outcome.question, buttons=buttons, decision_id=decision_id)
    return approval_message(outcome, decision_id)


def approval_text(outcome: AwaitingApproval) -> str:
    steps = outcome.plan.steps
    lines = [MAY_I_ONE if len(steps) == 1 else MAY_I_MANY]
    for index, step in enumerate(steps, 1):
        lines += ["", f"{index}. `{step.tool}`", "```", *_argument_lines(step.args), "```"]
        if step.description:
            lines.append(f"↳ described as: {defang(step.description)}")
    if outcome.plan.goal:
        lines += ["", f"Goal, as described: {defang(outcome.plan.goal)}"]
    return "\n".join(lines)


def _argument_lines(args: dict[str, Any]) -> list[str]:
    """One `name: value` line per argument, values as JSON so a newline cannot end the block."""
    if not args:
        return ["(no arguments)"]
    lines = []
    for key, value in args.items():
        shown = _shown(value)
        if len(shown) > FOLD_AT:
            head = shown[:FOLD_AT]
            cut = head.rfind("\\", FOLD_AT - 10)  # not inside an escape like \u202e
            head = head[:cut] if cut > 0 else head
            more = len(shown) - len(head)
            shown = FOLDED.format(head=head, more=more)
        lines.append(f"{_name(key)}: {_FENCE_BREAK.sub(WORD_JOINER, shown)}")
    return lines


def continuations(outcome: AwaitingApproval) -> list[OutboundMessage]:
    """The whole of each argument the prompt folds, one message each, sent before it."""
    found = []
    for index, step in enumerate(outcome.plan.steps, 1):
        for key, value in step.args.items():
            shown = _shown(value)
            if len(shown) > FOLD_AT:
                name = defang(_name(key))
                title = f"Step {index} ({step.tool}), {name} in full ({len(shown):,} characters):"
                body = _FENCE_BREAK.sub(WORD_JOINER, shown)
                found.append(OutboundMessage(text=f"{title}\n```\n{body}\n```"))
    return found


def _name(key: str) -> str:
    return key if _KEY.match(key) else visible(json.dumps(key, ensure_ascii=False))


def _shown(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False, default=str))


# control, format (bidi overrides, zero-width, tags), line/paragraph separators, surrogates,
# private use, unassigned: what a reader cannot see or that reorders what they see
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def visible(text: str) -> str:
    """`text` with every invisible or reordering character written as an escape (\\u202e)."""
    return "".join(
        (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        if unicodedata.category(c) in _HIDDEN
        else c
        for c in text
    )


def defang(text: str) -> str:
    """The model's free text on one line, invisible characters shown, with mentions and links
    that cannot fire."""
    flat = visible(" ".join(text.split()))
    if len(flat) > NOTE_LIMIT:
        flat = flat[: NOTE_LIMIT - 1] + "…"
    return _LIVE.sub(lambda m: m.group(0) + WORD_JOINER, flat).replace("`", "'")


def approval_message(outcome: AwaitingApproval, decision_id: str | None) -> OutboundMessage:
    buttons = [
        Button(label="Approve", value=APPROVE, style="primary"),
        Button(label="Reject", value=REJECT, style="danger"),
    ]
    if standing_tools(outcome.plan.steps, outcome.plan.uncertain):
        one = len({step.tool for step in outcome.plan.steps}) == 1
        label = "Always for this tool" if one else "Always for these tools"
        buttons.insert(1, Button(label=label, value=ALWAYS))
    return OutboundMessage(
        text=approval_text(outcome),
        buttons=tuple(buttons),
        decision_id=decision_id,
        plan=proposed_plan(outcome),
    )


def proposed_plan(outcome: AwaitingApproval) -> ProposedPlan:
    """The plan as a platform may draw it above the prompt: each step's tool (what runs), the
    model's words about it defanged, like every other line of theirs."""
    context, goal = outcome.state.context, outcome.plan.goal
    return ProposedPlan(
        title=f"{PROPOSED_PLAN}: {defang(goal)}" if goal else PROPOSED_PLAN,
        steps=tuple((step.tool, defang(step.description or "")) for step in outcome.plan.steps),
        requester=context.user_id,
        team=context.team_id,
    )


def standing_tools(steps: list[PlanStep], uncertain: list[PlanStep]) -> list[tuple[str, str]]:
    """(tool, digest) of each step when every step may be approved for good, else none: a
    plan with a step of unknown fate, or of a server without `"standing": true`, has none."""
    if not steps or uncertain or any(step.standing is None for step in steps):
        return []
    return sorted({(step.tool, step.standing) for step in steps if step.standing})


def deciders(requester: str, approvers: frozenset[str], requester_only: bool) -> tuple[str, ...]:
    """Whom a prompt in a shared chat is for: the requester first, then the approvers (unless
    it is a tool's own question, the requester's alone)."""
    return (requester,) if requester_only else (requester, *sorted(approvers - {requester}))


def unreachable_line(addressing: Addressing) -> str:
    """Said in a shared chat instead of a private message the platform would not deliver."""
    with_me = f" ({addressing.mention})" if addressing.mention else ""
    return PRIVATE_UNREACHABLE.format(with_me=with_me)


def decided_message(decision: Decision) -> OutboundMessage:
    """The decision's message, buttons gone, with what became of it and who decided."""
    line = decided_line(decision)
    return OutboundMessage(
        text=f"{decision.text}\n\n{line.text}",
        allowed_mentions=line.allowed_mentions,
        private_to=decision.private_to,  # an ephemeral prompt is replaced for its person alone
    )


def decided_line(decision: Decision) -> OutboundMessage:
    """What became of a decision and who decided, in one line ("✅ Approved by Ana")."""
    who = decision.decided_by
    line = DECIDED.get(decision.status)
    outcome = line.format(who=who) if line is not None else decision.status
    return OutboundMessage(text=outcome, allowed_mentions=frozenset({who}))


def stale_click_text(decision: Decision | None, now: float) -> str:
    """What a press on a button that no longer decides anything is told."""
    if decision is None:
        return BUTTON_GONE
    if decision.status == "expired" or decision.expired(now):
        return REQUEST_EXPIRED
    return ALREADY.get(decision.status, NO_LONGER_WAITING).format(who=decision.decided_by)


OBJECTIVE_LIMIT = 80  # characters of the stopped request shown


def stopped_text(outcome: Failed) -> str:
    """What a stopped run was doing, and which of its calls ran before the stop."""
    objective = defang(outcome.state.objective)
    if len(objective) > OBJECTIVE_LIMIT:
        objective = objective[: OBJECTIVE_LIMIT - 1] + "…"
    lines = [STOPPED_TEXT.format(objective=f"“{objective}”")]
    calls = [*outcome.trace.resumed_calls, *(c for s in outcome.trace.steps for c in s.tool_calls)]
    done = [
        f"`{c.tool}`" + (" (failed)" if c.is_error else "")
        for c in calls
        if c.status in ("ok", "error")
    ]
    not_run = [f"`{c.tool}`" for c in calls if c.status == "skipped"]
    if done:
        lines.append(STOPPED_DONE.format(calls=", ".join(done)))
    if not_run:
        lines.append(STOPPED_NOT_RUN.format(calls=", ".join(not_run)))
    return "\n".join(lines)
