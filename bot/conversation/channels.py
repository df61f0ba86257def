"""`read_channel` for the agent, answered by the adapter of the conversation's platform."""

from __future__ import annotations

from collections.abc import Mapping

from adapters.base import ChannelRefused, ChannelSource
from agent.channels import ChannelMessage
from agent.protocols import RunContext
from agent.tools import ToolError


class Channels:
    def __init__(self, adapters: Mapping[str, object]) -> None:
        self.adapters = adapters

    async def read_channel(
        self, context: RunContext, channel: str, since: float
    ) -> list[ChannelMessage]:
        adapter = self.adapters.get(context.platform)
        if not isinstance(adapter, ChannelSource):
            raise ToolError(f"Channels can't be read on {context.platform}.")
        try:
            found = await adapter.read_channel(context.user_id, channel, since)
        except ChannelRefused as exc:
            raise ToolError(str(exc)) from exc
        return [
            ChannelMessage(author=m.author, text=m.text, at=m.at or 0.0, from_bot=m.from_bot)
            for m in found
        ]
