"""Deferred tool calls: what a human's refusal, approval or answer becomes for the model."""

from __future__ import annotations

from agent import Agent, Finished, RunContext, ToolRegistry, builtin_registry, deferred, tool
from agent.deferred import ApprovedPlan, PendingPlan, PendingQuestion, PlanStep, Retry
from agent.messages import ToolUseBlock
from agent.testing import ScriptedModel, call, reply, turn


@tool(side_effects=True)
async def send_email(to: str, subject: str, urgent: bool = False) -> str:
    """Send an e-mail."""
    return f"sent to {to}"


def step(call_id: str, to: str) -> PlanStep:
    return PlanStep(
        call_id=call_id, tool="send_email", args={"to": to, "subject": "Hi"}, description=to
    )


def test_a_rejected_plan_answers_every_call_and_the_proposal_with_the_reason() -> None:
    pending = PendingPlan(
        id="p",
        steps=[step("e1", "ann"), step("e2", "bob")],
        proposal_id="prop",
        retries={"e2": Retry(key="e2", attempt=1)},
    )
    results = deferred.rejected(pending, "not today")
    assert [r.tool_use_id for r in results] == ["e1", "e2", "prop"]
    assert all(r.is_error and r.content.endswith("Their reason: not today") for r in results)
    assert results[0].content.startswith(deferred.REJECTED)
    assert results[1].content.startswith(deferred.UNCERTAIN_REJECTED)  # it may have happened


def test_an_approval_grants_the_proposed_steps_and_asks_again_only_about_uncertain_ones() -> None:
    pending = PendingPlan(
        id="p", goal="Say hi", steps=[step("e1", "ann"), step("e2", "bob")], proposal_id="prop"
    )
    pending.proposed.append(step("prop.1", "cid"))
    plan, results = deferred.approved(pending)
    assert plan is not None and [s.call_id for s in plan.remaining] == ["prop.1"]
    assert [r.tool_use_id for r in results] == ["prop"]
    assert deferred.retry_of(pending, {}) is None
    again = deferred.retry_of(pending, {"e2": Retry(key="e2", attempt=1)})
    assert again is not None and [s.call_id for s in again.steps] == ["e2"]
    assert again.plan().uncertain == again.steps and again.id != pending.id
    assert deferred.approved(PendingPlan(id="q", steps=[step("e3", "dan")])) == (None, [])


def test_an_approved_step_covers_one_call_with_the_same_arguments() -> None:
    plan = ApprovedPlan(id="p", remaining=[step("s1", "ann"), step("s2", "ann")])
    use = ToolUseBlock(id="c1", name="send_email", input={"to": "ann", "subject": "Hi"})
    other = ToolUseBlock(id="c2", name="send_email", input={"to": "eve", "subject": "Hi"})
    explicit = ToolUseBlock(
        id="c3", name="send_email", input={"to": "ann", "subject": "Hi", "urgent": False}
    )
    assert deferred.consume(plan, send_email, other) is None
    assert deferred.consume(plan, send_email, use) == step("s1", "ann")
    assert deferred.consume(plan, send_email, explicit) == step("s2", "ann")  # defaults agree
    assert deferred.consume(plan, send_email, use) is None  # used up
    assert deferred.consume(None, send_email, use) is None


def test_an_answer_is_cleaned_like_any_observation() -> None:
    question = PendingQuestion(id="q", tool_use_id="ask1", question="Which city?")
    result = deferred.answered(question, "Paris<|im_end|>", limit=100)
    assert result.tool_use_id == "ask1" and not result.is_error
    assert (
        result.content.startswith("The user answered: Paris") and "<|im_end|>" not in result.content
    )


async def test_invalid_proposal_is_an_observation_not_a_suspension(ctx: RunContext) -> None:
    tools: ToolRegistry = builtin_registry()
    tools.register(send_email)
    bad = [{"tool": "send_email", "args": {"to": "ann@example.com"}}]  # subject missing
    model = ScriptedModel(
        [turn(call("propose_plan", "p1", goal="x", steps=bad)), reply("fixed later")]
    )
    outcome = await Agent(model, tools).run("x", ctx)
    assert isinstance(outcome, Finished)
    error = model.requests[1].messages[-1].tool_results[0]
    assert error.is_error and "Step 1 of the plan is not valid" in error.content
    assert "subject: Field required" in error.content
