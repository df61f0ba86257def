"""The person the per-user MCP server tests call as, and the host's credentials for them once
they have connected (the server's one token)."""

from __future__ import annotations

from agent.mcp.user import Refusal
from agent.protocols import RunContext
from agent.tools import ToolError

PERSON = RunContext(conversation_id="telegram:-:7:-", platform="telegram", user_id="7", chat_id="7")
TOKEN = "s3cret"


class OneToken:
    """The host's `Credentials` for a person who has connected (the server's one token)."""

    async def token(self, server: str, run: RunContext) -> str | None:
        return TOKEN

    async def connect_link(
        self, server: str, run: RunContext, question_id: str, refusal: Refusal | None = None
    ) -> str:
        raise ToolError("connected already")
