"""Whether a person is still in a Slack channel, for a schedule's slot (`member_of`).

Read from `conversations.members` and the allowlists (the adapter's `channel_info`). A
direct chat is the person's own (a deactivated account is `user_left`'s to say); a channel
Slack no longer knows, or one Parley was removed from, has nobody in it for Parley; a member
list longer than Parley reads, or Slack not answering, is "cannot tell" (None).
"""

from __future__ import annotations

from typing import Protocol

import aiohttp
from slack_sdk.errors import SlackApiError

from adapters.base import ChannelInfo, ChannelRefused, ConversationKey

GONE = ("channel_not_found", "not_in_channel")


class Channels(Protocol):
    """The Slack adapter, as far as this needs it."""

    async def acting_in(self, conversation: ConversationKey) -> None: ...

    async def channel_info(self, channel: str) -> ChannelInfo: ...


async def member_of(adapter: Channels, conversation: ConversationKey, user_id: str) -> bool | None:
    """The Slack adapter's `member_of` (ChatAdapter)."""
    if conversation.chat_id.startswith("D"):
        return True
    await adapter.acting_in(conversation)  # that workspace's token and members
    try:
        info = await adapter.channel_info(conversation.chat_id)
    except ChannelRefused as exc:
        cause = exc.__cause__
        error = cause.response.get("error") if isinstance(cause, SlackApiError) else None
        return False if error in GONE else None
    except (aiohttp.ClientError, TimeoutError):
        return None
    if not info.allowed or (info.complete and not info.with_parley):
        return False
    if user_id in info.members:
        return True
    return False if info.complete else None
