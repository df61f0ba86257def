"""Each tool's approval class as first listed, kept in Redis so it outlives the process.

A server may tighten a tool's class (now needs approval, no longer safe to repeat) and is
never believed when it loosens one (`tools.pin`). Held only in memory, that promise ended
with the process: a server that flipped a reviewed tool to read-only just before a restart
got it run without approval after it. So the classes are kept in one hash per server,
`<prefix>:mcp:pins:<server>` (field: the server's tool name; value: two digits, "needs
approval" and "repeatable"), merged by one Lua script that only ever tightens, whichever
process lists first. Redis away: the listing's tools all need approval until it is back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from agent.mcp.tools import McpTool, pin
from replies import as_text

log = logging.getLogger(__name__)

Classes = dict[str, tuple[bool, bool]]  # tool → (needs approval, repeatable)

# KEYS[1] the server's hash; ARGV: name, "<approval><repeatable>", ... Merged so that needs
# approval is kept once seen and repeatable is kept only while always seen; returns the hash.
_MERGE = """
for i = 1, #ARGV, 2 do
  local new = ARGV[i + 1]
  local old = redis.call('hget', KEYS[1], ARGV[i])
  if old then
    local approval = (string.sub(old, 1, 1) == '1' or string.sub(new, 1, 1) == '1')
    local repeatable = (string.sub(old, 2, 2) == '1' and string.sub(new, 2, 2) == '1')
    new = (approval and '1' or '0') .. (repeatable and '1' or '0')
  end
  redis.call('hset', KEYS[1], ARGV[i], new)
end
return redis.call('hgetall', KEYS[1])
"""


class Pins(Protocol):
    async def load(self, server: str) -> Classes | None:
        """The classes kept for `server`; None when they cannot be read now."""
        ...

    async def merge(self, server: str, seen: Classes) -> Classes | None:
        """Keep `seen` (only ever tightening); every class kept, or None when unreachable."""
        ...


class RedisPins:
    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix
        self._merge = redis.register_script(_MERGE)

    def key(self, server: str) -> str:
        return f"{self.prefix}:mcp:pins:{server}"

    async def load(self, server: str) -> Classes | None:
        try:
            raw = await self.redis.hgetall(self.key(server))
        except RedisError as exc:
            log.warning("MCP server %s: approval classes unreadable (%s)", server, exc)
            return None
        return _classes(list(raw.items()))

    async def merge(self, server: str, seen: Classes) -> Classes | None:
        if not seen:
            return await self.load(server)
        args: list[str] = []
        for name, (approval, repeatable) in seen.items():
            args += [name, f"{int(approval)}{int(repeatable)}"]
        try:
            flat = await self._merge(keys=[self.key(server)], args=args)
        except RedisError as exc:
            log.warning("MCP server %s: approval classes not kept (%s)", server, exc)
            return None
        return _classes(list(zip(flat[::2], flat[1::2], strict=True)))


async def keep(pins: Pins | None, server: str, tools: Sequence[McpTool], pinned: Classes) -> bool:
    """Hold `tools` to their classes as first listed: `pinned` (this process's) and, with
    `pins`, those kept for every process (merged into both). False when the kept ones cannot
    be read or written now: then every tool needs approval."""
    for tool in tools:
        pin(tool, pinned)
    if pins is None:
        return True
    kept = await pins.load(server)
    merged: Classes | None = None
    if kept is not None:
        for name, classes in kept.items():
            pinned[name] = tighter(pinned.get(name), classes)
        merged = await pins.merge(server, pinned)
    if merged is None:
        for tool in tools:
            tool.side_effects, tool.retries, tool.repeatable = True, 0, False
        return False
    pinned.update(merged)
    for tool in tools:
        pin(tool, pinned)
    return True


def tighter(held: tuple[bool, bool] | None, kept: tuple[bool, bool]) -> tuple[bool, bool]:
    """The stricter of two classes: needs approval if either does, repeatable if both are."""
    if held is None:
        return kept
    return held[0] or kept[0], held[1] and kept[1]


def _classes(pairs: list[tuple[bytes | str, bytes | str]]) -> Classes:
    found: Classes = {}
    for name, value in pairs:
        text, tool = as_text(value), as_text(name)
        found[tool] = (text[:1] == "1", text[1:2] == "1")
    return found
