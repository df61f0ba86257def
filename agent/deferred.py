"""Deferred tool calls: the part of a turn that waits for a human.

Three kinds, in the spirit of pydantic-ai's deferred tools: `ask_user` waits for an answer
(`PendingQuestion`); side-effecting calls wait for an approval (`PendingPlan`, shown as a
`Plan`); `propose_plan` asks once for a series of such calls, and once approved
(`ApprovedPlan`) each of its steps runs without asking again. Everything here is data and
pure functions over it: what the run keeps while it waits, the two human tools, and the
tool results a human's answer or refusal becomes. `turns` decides when a turn defers and
runs what an approval allows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from agent.messages import ToolResultBlock, ToolUseBlock
from agent.observations import clean
from agent.protocols import RunContext
from agent.tools import ApprovalRequired, InputRequired, QuestionRequired, Tool, ToolError, tool

ASK_USER = "ask_user"
PROPOSE_PLAN = "propose_plan"
REJECTED = "The user rejected this action; it was not run."
UNCERTAIN = (
    "This action may or may not have happened: the service stopped while it was running, "
    "so it is not known whether it took effect."
)
UNCERTAIN_REJECTED = f"{UNCERTAIN} The user chose not to try it again."
PLAN_APPROVED = (
    "The user approved the plan. Call its steps now; they will run without asking again."
)


def new_id() -> str:
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True, kw_only=True)
class PlanStep:
    """One side-effecting call awaiting (or covered by) a human approval."""

    call_id: str
    tool: str
    args: dict[str, Any]
    description: str
    private: bool = False  # its result is for the requester alone (`ApprovalRequired`)
    # The tool's `standing_digest`: the requester may approve it for good ("Always").
    standing: str | None = None


@dataclass(frozen=True, kw_only=True)
class Plan:
    id: str
    goal: str | None
    steps: list[PlanStep]
    # Steps whose earlier run was interrupted: they may or may not have happened, and
    # approving runs them once more.
    uncertain: list[PlanStep] = field(default_factory=list)


class ResumedCall(BaseModel):
    """A call waiting for the requester's answer to its question, to be made again."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    resume: dict[str, Any] = Field(default_factory=dict)  # the tool's, from `InputRequired`
    key: str | None = None  # set when the call was approved: its idempotency key


class PendingQuestion(BaseModel):
    """An `ask_user` call waiting for the user's answer."""

    id: str
    tool_use_id: str
    question: str
    options: list[str] = Field(default_factory=list)
    # A URL button for the requester alone (Connect <server>), from `QuestionRequired`.
    link_label: str | None = None
    link_url: str | None = None
    # A tool's own question (`InputRequired`): the call, made again with the answer.
    call: ResumedCall | None = None
    # The call that asked the requester to connect an account (`QuestionRequired`): made once
    # they have, with their account (agent/connecting.py).
    connect_call: ResumedCall | None = None


class Retry(BaseModel):
    """A call whose earlier attempt started and never reported back, asked about again."""

    key: str  # the call's journal and idempotency key
    attempt: int  # the attempt an approval would start


class PendingPlan(BaseModel):
    """Side-effecting calls (and perhaps a proposed plan) waiting for approval."""

    id: str
    goal: str | None = None
    steps: list[PlanStep] = Field(default_factory=list)  # calls of the turn, run on approval
    proposal_id: str | None = None  # the propose_plan tool_use, if the model proposed a plan
    proposed: list[PlanStep] = Field(default_factory=list)  # steps it covers once approved
    retries: dict[str, Retry] = Field(default_factory=dict)  # by call id: steps of unknown fate

    def plan(self) -> Plan:
        return Plan(
            id=self.id,
            goal=self.goal,
            steps=[*self.steps, *self.proposed],
            uncertain=[step for step in self.steps if step.call_id in self.retries],
        )


class ApprovedPlan(BaseModel):
    """A proposed plan the user approved; each step may run once without asking again."""

    id: str
    goal: str | None = None
    remaining: list[PlanStep] = Field(default_factory=list)


class ProposedStep(BaseModel):
    tool: str = Field(description="Name of the side-effecting tool to call.")
    args: dict[str, Any] = Field(default_factory=dict, description="The arguments it will get.")
    description: str = Field("", description="One line saying what this step does.")


@tool(name=ASK_USER, category="human")
async def ask_user(question: str, options: list[str] | None = None) -> str:
    """Ask the user a clarifying question and wait for the answer.

    Args:
        question: One short question.
        options: A few likely answers to offer as buttons; the user may also type another.
    """
    raise ToolError("ask_user is handled by the agent loop")  # the loop suspends instead


@tool(name=PROPOSE_PLAN, category="human")
async def propose_plan(goal: str, steps: list[ProposedStep]) -> str:
    """Ask the user once to approve a plan of several side-effecting calls.

    Once approved, each listed call (same tool, same arguments) runs without asking again.

    Args:
        goal: What the plan achieves, in one sentence.
        steps: The side-effecting calls, in the order you will make them.
    """
    raise ToolError("propose_plan is handled by the agent loop")


def question_for(use: ToolUseBlock) -> PendingQuestion:
    """The question an (already validated) `ask_user` call puts to the user."""
    return PendingQuestion(
        id=new_id(),
        tool_use_id=use.id,
        question=str(use.input["question"]),
        options=[str(o) for o in use.input.get("options") or []],
    )


def step_for(
    use: ToolUseBlock,
    tool: Tool,
    asked: ApprovalRequired | None = None,
    context: RunContext | None = None,
) -> PlanStep:
    return PlanStep(
        call_id=use.id,
        tool=tool.name,
        args=dict(use.input),
        description=asked.description if asked else tool.describe_call(use.input, context),
        private=asked.private if asked else False,
        standing=tool.standing_digest,
    )


def proposed_steps(
    use: ToolUseBlock,
    proposal: Tool,
    check: Callable[[ToolUseBlock], Tool | str],
    run: RunContext | None = None,
) -> list[PlanStep] | str:
    """The steps of a valid `propose_plan` call that need approval, or why one is not valid
    (`check` gives the tool a call names, or the problem with the call)."""
    steps: list[PlanStep] = []
    for index, raw in enumerate(proposal.validate(use.input)["steps"], start=1):
        inner = check(ToolUseBlock(id="-", name=raw.tool, input=raw.args))
        if isinstance(inner, str):
            return f"Step {index} of the plan is not valid: {inner}"
        if inner.needs_approval(raw.args, run):
            inner_use = ToolUseBlock(id=f"{use.id}.{index}", name=raw.tool, input=raw.args)
            step = step_for(inner_use, inner)
            if raw.description:
                step = PlanStep(
                    call_id=step.call_id,
                    tool=step.tool,
                    args=step.args,
                    description=raw.description,
                )
            steps.append(step)
    return steps


def consume(plan: ApprovedPlan | None, tool: Tool, use: ToolUseBlock) -> PlanStep | None:
    """The approved plan's step that covers this call, if any; a covered step is used up."""
    if plan is None:
        return None
    wanted = tool.normalize(use.input)
    for index, step in enumerate(plan.remaining):
        if step.tool == tool.name and tool.normalize(step.args) == wanted:
            return plan.remaining.pop(index)
    return None


def answered(question: PendingQuestion, answer: str, limit: int) -> ToolResultBlock:
    """The `ask_user` call's result: the user's answer, as untrusted as any observation."""
    return ToolResultBlock(
        tool_use_id=question.tool_use_id, content=f"The user answered: {clean(answer, limit)}"
    )


def rejected(pending: PendingPlan, reason: str | None) -> list[ToolResultBlock]:
    """A result for every call of a rejected plan (and its proposal), with the reason given."""
    because = f" Their reason: {clean(reason, 500)}" if reason else ""
    results = [
        ToolResultBlock(
            tool_use_id=step.call_id,
            content=f"{UNCERTAIN_REJECTED if step.call_id in pending.retries else REJECTED}"
            f"{because}",
            is_error=True,
        )
        for step in pending.steps
    ]
    if pending.proposal_id:
        results.append(
            ToolResultBlock(
                tool_use_id=pending.proposal_id,
                content=f"The user rejected the plan.{because}",
                is_error=True,
            )
        )
    return results


def approved(pending: PendingPlan) -> tuple[ApprovedPlan | None, list[ToolResultBlock]]:
    """What an approval grants beyond the plan's own calls: the proposed plan's steps."""
    if not pending.proposal_id:
        return None, []
    plan = ApprovedPlan(id=pending.id, goal=pending.goal, remaining=list(pending.proposed))
    return plan, [ToolResultBlock(tool_use_id=pending.proposal_id, content=PLAN_APPROVED)]


def retry_of(pending: PendingPlan, uncertain: dict[str, Retry]) -> PendingPlan | None:
    """The plan to put to the user again for the steps of unknown fate, if any."""
    if not uncertain:
        return None
    return PendingPlan(
        id=new_id(),
        goal=pending.goal,
        steps=[step for step in pending.steps if step.call_id in uncertain],
        retries=uncertain,
    )


def asked_question(
    use: ToolUseBlock, asked: QuestionRequired | InputRequired, key: str | None = None
) -> PendingQuestion:
    """What the run waits on when a call asks the requester first."""
    call = ResumedCall(tool=use.name, args=dict(use.input), key=key)
    if isinstance(asked, InputRequired):  # answered by making the call again
        call.resume = asked.resume
        return PendingQuestion(
            id=new_id(),
            tool_use_id=use.id,
            question=asked.question,
            options=asked.options,
            call=call,
        )
    return PendingQuestion(
        id=asked.question_id,
        tool_use_id=use.id,
        question=asked.question,
        link_label=asked.label,
        link_url=asked.url,
        connect_call=call,
    )


def plan_of(
    use: ToolUseBlock, tool: Tool, context: RunContext, asked: ApprovalRequired | None = None
) -> PendingPlan:
    """One call put to the requester for approval."""
    return PendingPlan(id=new_id(), steps=[step_for(use, tool, asked, context)])
