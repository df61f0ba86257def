"""The revision a session starts with: the preferred one, else the other when the server
refuses it (a server that speaks only one)."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

from agent.mcp.config import Revision
from agent.mcp.revision import completed, negotiate


class OneRevisionSession:
    """Stands in for a `ClientSession` whose server speaks one revision only."""

    def __init__(self, speaks: Revision) -> None:
        self.speaks = speaks
        self.protocol_version: str | None = None
        self.tried: list[str] = []

    async def initialize(self) -> Any:
        self.tried.append("initialize")
        return self._answer("2025-11-25")

    async def discover(self) -> Any:
        self.tried.append("server/discover")
        return self._answer("2026-07-28")

    def _answer(self, revision: str) -> None:
        if revision != self.speaks:
            raise MCPError(mt.METHOD_NOT_FOUND, "Method not found")
        self.protocol_version = revision


@pytest.mark.parametrize(
    ("prefer", "speaks", "tried"),
    [
        ("2025-11-25", "2025-11-25", ["initialize"]),
        ("2025-11-25", "2026-07-28", ["initialize", "server/discover"]),
        ("2026-07-28", "2026-07-28", ["server/discover"]),
        ("2026-07-28", "2025-11-25", ["server/discover", "initialize"]),
    ],
)
async def test_the_preferred_revision_then_the_other(
    prefer: Revision, speaks: Revision, tried: list[str]
) -> None:
    session = OneRevisionSession(speaks)
    assert await negotiate(session, prefer) == speaks  # type: ignore[arg-type]
    assert session.tried == tried


async def test_a_server_that_refuses_both_is_an_error() -> None:
    session = OneRevisionSession("2025-11-25")
    session.speaks = "none"  # type: ignore[assignment]
    with pytest.raises(MCPError):
        await negotiate(session, "2025-11-25")  # type: ignore[arg-type]


class Checked:
    """Stands in for a session's output-schema check (`validate_tool_result`)."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    async def validate_tool_result(self, name: str, result: mt.CallToolResult) -> None:
        self.checked.append(name)


def refused(raw: dict[str, Any]) -> ValidationError:
    """What the SDK raises for a 2026-07-28 tools/call result of that shape."""
    with pytest.raises(ValidationError) as caught:
        validate_server_result("tools/call", "2026-07-28", raw)
    return caught.value


async def test_a_result_without_result_type_is_complete() -> None:
    # 2026-07-28: "a missing resultType means complete"; the SDK's wire check requires it
    session = Checked()
    raw = {"content": [{"type": "text", "text": "done"}]}
    result = await completed(session, "tool", refused(raw))  # type: ignore[arg-type]
    assert isinstance(result, mt.CallToolResult) and result.content[0].text == "done"  # type: ignore[union-attr]
    assert session.checked == ["tool"]  # its output schema is still checked


@pytest.mark.parametrize(
    "raw",
    [
        {"content": "not a list"},  # wrong besides the missing resultType
        {"content": [], "isError": "perhaps"},
        {"content": [{"type": "text"}]},
    ],
)
async def test_a_result_wrong_in_any_other_way_stays_refused(raw: dict[str, Any]) -> None:
    assert await completed(Checked(), "tool", refused(raw)) is None  # type: ignore[arg-type]
