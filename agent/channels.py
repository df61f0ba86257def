"""`read_channel`: what was said in a channel lately, read-only, when the model asks for it.

Channel history never comes along by itself; the model calls this tool ("summarise the last
hour in #x"). Whether it may be read is the `ChannelReader`'s decision (the bot asks the
platform): never a channel the requester could not read themselves, and only with their
approval, answered to them alone, one that not everyone who sees the answer could read.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from agent.framing import indented, speaker
from agent.protocols import RunContext
from agent.tools import Tool, ToolContext, ToolError

OUTPUT_CHARS = 3500  # under the default tool output limit, so the newest lines survive
MAX_SINCE = 7 * 86_400.0
_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|mins|minutes?|h|hours?|d|days?)\s*$", re.I)


@dataclass(frozen=True, kw_only=True)
class ChannelMessage:
    author: str
    text: str
    at: float  # epoch seconds
    from_bot: bool = False


class ChannelReader(Protocol):
    async def read_channel(
        self, context: RunContext, channel: str, since: float, *, approved: bool = False
    ) -> list[ChannelMessage]:
        """Messages in `channel` since `since` (epoch seconds), oldest first; ToolError when
        the channel is unknown or the requester may not read it; ApprovalRequired when not
        everyone who sees the answer could read it (`approved`: the requester said yes)."""
        ...


def parse_since(value: str, now: float | None = None) -> float:
    """Epoch seconds from "30m" / "2h" / "1d" or an ISO 8601 time; at most a week back."""
    now = time.time() if now is None else now
    match = _SPAN.match(value)
    if match:
        amount, unit = float(match.group(1)), match.group(2).lower()
        seconds = amount * {"m": 60, "h": 3600, "d": 86_400}[unit[0]]
        start = now - seconds
    else:
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise ToolError(
                f"since must look like 30m, 2h, 1d or an ISO time, not {value!r}"
            ) from exc
        start = parsed.timestamp()
    return max(start, now - MAX_SINCE)


def render(messages: list[ChannelMessage], limit: int = OUTPUT_CHARS) -> str:
    if not messages:
        return "No messages in that time."
    lines: list[str] = []
    size = 0
    for message in reversed(messages):  # the newest are kept when there is too much
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(message.at))
        who = speaker(message.author, message.from_bot)
        line = f"[{stamp} UTC] {who}: {indented(message.text)}"
        if size + len(line) > limit and lines:
            break
        lines.append(line)
        size += len(line) + 1
    lines.reverse()
    left_out = len(messages) - len(lines)
    head = f"({left_out} older messages left out)\n" if left_out else ""
    return head + "\n".join(lines)


def read_channel_tool(reader: ChannelReader) -> Tool:
    async def read_channel(channel: str, since: str, ctx: ToolContext) -> str:
        """Read what was said in a channel since a time (read-only): only channels that both
        Parley and the user are members of.

        Args:
            channel: the channel, as #name or its id
            since: how far back to read: "30m", "2h", "1d", or an ISO 8601 time (at most 7 days)
        """
        start = parse_since(since)
        return render(await reader.read_channel(ctx.run, channel, start, approved=ctx.approved))

    return Tool(read_channel, category="context")
