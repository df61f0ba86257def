"""Standing approvals in a turn: side-effecting calls the requester approved for good.

A call is covered when its tool may be approved for good (`Tool.standing_digest`) and the
host's `StandingApprovals` says the requester approved the tool as it is now shown. Covered
calls run like approved ones (journaled, at most once); a store that fails covers nothing, so
the call is put to the person as usual.

A schedule's permissions (`RunContext.standing`) bind the same way: each names a tool with
its `Tool.shown` digest from when the schedule was made (`bound`), and covers it only unchanged.
"""

from __future__ import annotations

import logging

from agent.messages import ToolUseBlock
from agent.protocols import RunContext, StandingApprovals
from agent.tools import Tool

log = logging.getLogger(__name__)

Call = tuple[ToolUseBlock, Tool]


async def split(
    standing: StandingApprovals, run: RunContext, calls: list[Call]
) -> tuple[list[Call], list[Call]]:
    """`calls` as (covered by a standing approval, still needing one)."""
    covered: list[Call] = []
    waiting: list[Call] = []
    for use, tool in calls:
        digest = tool.standing_digest
        if digest is not None and await _covers(standing, run, tool.name, digest):
            covered.append((use, tool))
        else:
            waiting.append((use, tool))
    return covered, waiting


def bound(name: str, shown: str | None) -> str:
    """A schedule's permission for `name`, bound to the tool as it is shown now (`Tool.shown`)."""
    return f"{name}@{shown}" if shown else name


def permitted(entry: str) -> str:
    """The tool a schedule's permission names (tool names never hold "@")."""
    return entry.partition("@")[0]


def permits(entries: tuple[str, ...], tool: Tool) -> bool:
    """Whether a schedule's permissions (`RunContext.standing`) cover `tool` as it is now: a
    tool changed since (or never seen) when the schedule was made is asked about again."""
    return bound(tool.name, tool.shown) in entries


async def _covers(standing: StandingApprovals, run: RunContext, tool: str, digest: str) -> bool:
    try:
        return await standing.covers(run, tool, digest)
    except Exception:  # an unreachable store: ask, as without an approval
        log.warning("standing approvals unavailable; asking for %s", tool, exc_info=True)
        return False
