"""What a tool is handed besides its arguments: the run's context and the host's own objects.

A tool asks for the host's objects by type, like FastAPI's dependencies or pydantic-ai's
`deps`: a parameter annotated `Dep[Shop]` receives the `Shop` the host provided with
`ToolRegistry.provide(Shop, shop)` or `Agent(..., deps={Shop: shop})`. Like a `ToolContext`
parameter, it is injected and is not part of the tool's schema. A run whose tools need a
type nobody provided does not start: `MissingDependency` names the tool and the type.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeAlias, TypeVar, get_args, get_origin

from agent.protocols import MemoryStore, RunContext, Scheduler

T = TypeVar("T")


class _Injected:
    """The mark `Dep` puts on an annotation."""

    def __repr__(self) -> str:
        return "injected"


INJECTED = _Injected()
Dep: TypeAlias = Annotated[T, INJECTED]


class MissingDependency(LookupError):
    """A tool needs an object of a type the host did not provide."""

    def __init__(self, tool: str, kind: type[Any]) -> None:
        name = kind.__qualname__
        super().__init__(
            f"tool {tool!r} needs a {name}: provide one with "
            f"ToolRegistry.provide({name}, ...) or Agent(deps={{{name}: ...}})"
        )
        self.tool = tool
        self.kind = kind


def dependency_type(annotation: Any) -> type[Any] | None:
    """The type a `Dep[...]` annotation asks for; None for any other annotation."""
    if get_origin(annotation) is Annotated and any(m is INJECTED for m in annotation.__metadata__):
        kind: type[Any] = get_args(annotation)[0]
        return kind
    return None


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What the loop hands a tool that asks for it."""

    run: RunContext
    memory: MemoryStore | None = None
    scheduler: Scheduler | None = None
    # The same for every attempt of one call (its tool-call id): pass it on to external APIs
    # that accept an idempotency key, so a retried request is recognised as the earlier one.
    idempotency_key: str = ""
    deps: Mapping[type[Any], object] = field(default_factory=dict)  # the host's, by type
    # The requester approved this very call (after it raised `ApprovalRequired`).
    approved: bool = False
    # The call made again after it raised `InputRequired`: what it asked to keep, plus
    # "answer", the requester's reply.
    resume: Mapping[str, Any] | None = None
    # Shows a running tool's own status line (an MCP server's progress) in the chat.
    progress: Callable[[str], Awaitable[None]] | None = None
    # The offered tools' `Tool.shown` digests, by name: what a schedule's permission binds to.
    shown: Mapping[str, str] = field(default_factory=dict)
    # The requester alone sees this run's answer (`RunState.private_to`): so does anything
    # the run's tools post later (a followed MCP task's result).
    private_to: str | None = None
