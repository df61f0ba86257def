"""`read_channel` for the agent, answered by the adapter of the conversation's platform.

What a read brings goes where the answer goes, so it is checked against the audience, not
only against the requester: a channel outside the allowlists, or one that the requester or
Parley is not in, is never read. A channel every member of this conversation is in too (or
the conversation itself, or any the requester is in, in a direct chat) is read at once;
any other needs the requester's **Approve**, and then the answer goes to them alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.base import ChannelInfo, ChannelRefused, ChannelSource
from agent.channels import ChannelMessage
from agent.protocols import RunContext
from agent.tools import ApprovalRequired, ToolError

NOT_ALLOWED = "{channel} is outside the channels Parley is allowed to use."
NOT_SHARED = "{channel} can only be read when both Parley and the user are members of it."
ASK = (
    "Read {channel} and answer you privately: not everyone who can see this conversation is "
    "a member of it"
)


class Channels:
    def __init__(self, adapters: Mapping[str, object]) -> None:
        self.adapters = adapters

    async def read_channel(
        self, context: RunContext, channel: str, since: float, *, approved: bool = False
    ) -> list[ChannelMessage]:
        adapter = self.adapters.get(context.platform)
        if not isinstance(adapter, ChannelSource):
            raise ToolError(f"Channels can't be read on {context.platform}.")
        try:
            target = await adapter.channel_info(channel)
            if not target.allowed:
                raise ToolError(NOT_ALLOWED.format(channel=channel))
            if not target.with_parley or context.user_id not in target.members:
                raise ToolError(NOT_SHARED.format(channel=channel))
            if not approved and not await _everyone_here_may_read(adapter, context, target):
                raise ApprovalRequired(ASK.format(channel=channel), private=True)
            found = await adapter.channel_history(target.id, since)
        except ChannelRefused as exc:
            raise ToolError(str(exc)) from exc
        return [
            ChannelMessage(author=m.author, text=m.text, at=m.at or 0.0, from_bot=m.from_bot)
            for m in found
        ]


async def _everyone_here_may_read(
    adapter: ChannelSource, context: RunContext, target: ChannelInfo
) -> bool:
    """Whether everyone who can see this conversation's answer is a member of `target`."""
    if target.id == context.chat_id or context.is_direct:
        return True  # the same people; or the requester alone, whose membership was checked
    try:
        here = await adapter.channel_info(context.chat_id)
    except ChannelRefused:
        return False  # who sees this conversation is unknown: ask, don't assume
    return here.complete and here.members <= target.members
