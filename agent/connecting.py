"""After the requester connects an account: the call that asked them to is made.

A per-user server's tool asks a person who has not connected to do so (`QuestionRequired`,
a Connect button) and the run waits. When the wait ends (their sign-in came back, or they
replied), the same call is made again, now as them: its result reaches the model as the
answer to that call, and a call that changes things goes to them for approval first. Still
not connected (they replied instead), the model gets their reply as for any question. A
stand-in tool (`<server>__connect`) is gone once they have connected: the model gets the
reply and is offered the server's own tools.
"""

from __future__ import annotations

from typing import Protocol

from agent import deferred
from agent.deferred import PendingQuestion
from agent.execution import ExecutionPolicy
from agent.messages import ToolResultBlock, ToolUseBlock
from agent.state import RunState
from agent.tools import ApprovalRequired, InputRequired, QuestionRequired, ToolContext, ToolRegistry


class Actor(Protocol):
    """What of the turn's actor (`agent.turns.Actor`) this needs."""

    registry: ToolRegistry
    context: ToolContext
    policy: ExecutionPolicy

    async def run_call(self, use: ToolUseBlock, step: int) -> ToolResultBlock: ...

    def record_deferred(self, use: ToolUseBlock) -> None: ...


async def after_connect(
    actor: Actor, state: RunState, question: PendingQuestion, answer: str
) -> ToolResultBlock | None:
    """The call's result, or None when it waits again (an approval, the server's question)."""
    call = question.connect_call
    assert call is not None
    limit = actor.policy.output_limit
    if not actor.registry.has(call.tool):
        return deferred.answered(question, answer, limit)
    use = ToolUseBlock(id=question.tool_use_id, name=call.tool, input=call.args)
    tool = actor.registry.get(call.tool)
    run = actor.context.run
    if tool.side_effects:  # connected now, the real tool: it changes things, so ask first
        state.pending_plan = deferred.plan_of(use, tool, run)
        actor.record_deferred(use)
        return None
    try:
        return await actor.run_call(use, state.steps)
    except QuestionRequired:  # not connected after all: their reply is the answer
        return deferred.answered(question, answer, limit)
    except ApprovalRequired as asked:
        state.pending_plan = deferred.plan_of(use, tool, run, asked)
    except InputRequired as asked:
        state.pending_question = deferred.asked_question(use, asked)
    actor.record_deferred(use)
    return None
