"""How a run ends (or pauses), and the trace of what it did on the way.

A run segment — `Agent.run` or `Agent.resume` — returns exactly one outcome. The two
`Awaiting*` outcomes are not errors: they are deferred tool calls for a human, and the
caller resumes the run with the human's answer or decision (see `deferred`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.deferred import Plan, PlanStep
from agent.messages import Usage
from agent.state import RunState

__all__ = [
    "AwaitingAnswer",
    "AwaitingApproval",
    "Failed",
    "Finished",
    "Outcome",
    "Plan",
    "PlanStep",
    "RunTrace",
    "StepTrace",
    "ToolCallTrace",
    "failed",
]

FailReason = Literal[
    "max_steps",
    "token_budget",
    "deadline",
    "model_error",
    "cut",
    "context_window",
    "output_limit",
    "error",
    "stopped",
]


@dataclass(kw_only=True)
class ToolCallTrace:
    call_id: str
    tool: str
    args: dict[str, Any]
    observation: str = ""
    is_error: bool = False
    attempts: int = 0
    duration: float = 0.0
    status: Literal["ok", "error", "invalid", "deferred", "rejected", "skipped"] = "ok"
    known: bool = True  # False: the model named a tool the run does not offer

    @property
    def label(self) -> str:
        """The tool's name for metrics: one of the configured tools, or "unknown" (a name the
        model made up must not become a metric label)."""
        return self.tool if self.known else "unknown"


@dataclass(kw_only=True)
class StepTrace:
    """One THINK (model call) and the ACT that followed it."""

    index: int
    thought: str = ""
    model_duration: float = 0.0
    tool_calls: list[ToolCallTrace] = field(default_factory=list)
    duration: float = 0.0


@dataclass(kw_only=True)
class RunTrace:
    """What one run segment did: steps, tool use, tokens, errors."""

    steps: list[StepTrace] = field(default_factory=list)
    tool_counts: Counter[str] = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    resumed_calls: list[ToolCallTrace] = field(default_factory=list)  # run on approval
    standing: list[str] = field(default_factory=list)  # tools run under a standing approval
    summaries: int = 0  # extra model calls made to fold old turns
    duration: float = 0.0

    @property
    def iterations(self) -> int:
        return len(self.steps)

    def record_call(self, call: ToolCallTrace) -> None:
        (self.steps[-1].tool_calls if self.steps else self.resumed_calls).append(call)
        if call.status not in ("deferred", "skipped", "rejected"):
            self.tool_counts[call.tool] += 1
        if call.is_error:
            self.errors.append(f"{call.tool}: {call.observation[:200]}")


@dataclass(frozen=True, kw_only=True)
class Finished:
    answer: str
    state: RunState
    trace: RunTrace


@dataclass(frozen=True, kw_only=True)
class AwaitingAnswer:
    question: str
    options: list[str]
    question_id: str
    state: RunState
    trace: RunTrace
    link: tuple[str, str] | None = None  # (label, URL): a button for the requester alone


@dataclass(frozen=True, kw_only=True)
class AwaitingApproval:
    plan: Plan
    state: RunState
    trace: RunTrace


@dataclass(frozen=True, kw_only=True)
class Failed:
    reason: FailReason
    message: str  # short, kind and user-facing; never an exception's text
    state: RunState
    trace: RunTrace


Outcome = Finished | AwaitingAnswer | AwaitingApproval | Failed

FAIL_MESSAGES: dict[FailReason, str] = {
    "max_steps": "I took too many steps on this without finishing, so I stopped. "
    "Could you narrow the request down?",
    "token_budget": "This request used up the effort I'm allowed to spend on one task, "
    "so I stopped. Could you break it into smaller pieces?",
    "deadline": "This took longer than I'm allowed to work on one request, so I stopped. "
    "Please try again, perhaps with a smaller request.",
    "model_error": "I can't reach my language model right now; please try again in a few minutes.",
    "cut": "I lost the connection to my language model here, so this answer is cut off; "
    "ask me to go on once it is back.",
    "context_window": "This conversation no longer fits in my language model's memory, even "
    "after summarising it. Please start a new conversation.",
    "output_limit": "My reply kept getting cut off at the length I may write at once, so I "
    "stopped. Could you ask for something smaller?",
    "error": "Something went wrong on my side while working on this. Please try again.",
    "stopped": "Stopped.",  # the host says what was stopped (it knows who asked)
}


STOPPED = "Not run: the run stopped before this call."


def failed(
    reason: FailReason, state: RunState, trace: RunTrace, exc: BaseException | None = None
) -> Failed:
    """A Failed outcome, with the state made consistent so it can serve as history."""
    note = f"{reason}: {type(exc).__name__}" if exc else reason
    trace.errors.append(note)
    state.errors.append(note)
    state.abandon(STOPPED)
    return Failed(reason=reason, message=FAIL_MESSAGES[reason], state=state, trace=trace)
