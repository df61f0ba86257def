"""The platform-free agent core: ReAct loop, tools, prompts and LLM providers.

What a host program needs to embed the agent is importable from here: the `Agent` and its
`AgentConfig`; tools (`tool`, `Tool`, `ToolRegistry`, `ToolContext`, and `Dep` for the host's
own objects a tool asks for); who asks (`RunContext`); the provider protocol (`ChatModel`);
the outcomes a run ends with; the `RunState` to keep while a run waits for a human; and
`ScriptedModel` for the host's tests.
"""

from agent.builtin_tools import builtin_registry
from agent.deferred import PendingPlan, PendingQuestion, Plan, PlanStep
from agent.deps import Dep, MissingDependency
from agent.llm.base import ChatModel
from agent.loop import Agent, AgentConfig, ResumeError
from agent.outcomes import (
    AwaitingAnswer,
    AwaitingApproval,
    Failed,
    Finished,
    Outcome,
    RunTrace,
)
from agent.protocols import RunContext
from agent.state import RunState
from agent.testing import ScriptedModel
from agent.tools import (
    ApprovalRequired,
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
    "ApprovalRequired",
    "AwaitingAnswer",
    "AwaitingApproval",
    "ChatModel",
    "Dep",
    "Failed",
    "Finished",
    "MissingDependency",
    "Outcome",
    "PendingPlan",
    "PendingQuestion",
    "Plan",
    "PlanStep",
    "ResumeError",
    "RunContext",
    "RunState",
    "RunTrace",
    "ScriptedModel",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "TransientToolError",
    "builtin_registry",
    "tool",
]
