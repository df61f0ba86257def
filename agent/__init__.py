"""The platform-free agent core: ReAct loop, tools, prompts and LLM providers."""

from agent.builtin_tools import builtin_registry
from agent.loop import Agent, AgentConfig, ResumeError
from agent.outcomes import (
    AwaitingAnswer,
    AwaitingApproval,
    Failed,
    Finished,
    Outcome,
    Plan,
    PlanStep,
    RunTrace,
)
from agent.state import PendingPlan, PendingQuestion, RunState
from agent.tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    TransientToolError,
    tool,
)

__all__ = [
    "Agent",
    "AgentConfig",
    "AwaitingAnswer",
    "AwaitingApproval",
    "Failed",
    "Finished",
    "Outcome",
    "PendingPlan",
    "PendingQuestion",
    "Plan",
    "PlanStep",
    "ResumeError",
    "RunState",
    "RunTrace",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "TransientToolError",
    "builtin_registry",
    "tool",
]
