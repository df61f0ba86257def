"""A tool schema's `$ref`s resolve inside the schema: checking the model's arguments never
fetches a URL the server chose (a hostile server's network `$ref`)."""

from __future__ import annotations

import mcp.types as mt
import pytest
from pydantic import ValidationError

from agent.mcp.tools import McpTool
from tests.fakes.server import FakeServer, json_response

pytestmark = pytest.mark.network


async def _never(*args: object, **kwargs: object) -> mt.CallToolResult:
    raise AssertionError("not called")


async def test_a_network_ref_is_never_fetched_and_a_local_one_works() -> None:
    async with FakeServer(name="schemas") as schemas:
        schemas.add("GET", "/item.json", lambda r, q: _schema())
        tool = McpTool(
            server="shop",
            remote=mt.Tool(
                name="order",
                input_schema={
                    "type": "object",
                    "properties": {
                        "item": {"$ref": f"{schemas.url}/item.json"},
                        "count": {"$ref": "#/$defs/count"},
                    },
                    "$defs": {"count": {"type": "integer", "minimum": 1}},
                },
            ),
            caller=_never,
        )
        assert tool.validate({"count": 2}) == {"count": 2}
        with pytest.raises(ValidationError, match="integer"):
            tool.validate({"count": "two"})
        with pytest.raises(ValidationError, match="cannot be used"):
            tool.validate({"item": "book", "count": 1})
        assert schemas.requests == []


async def _schema() -> object:
    return json_response({"type": "string"})
