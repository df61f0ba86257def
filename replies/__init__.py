"""A Redis reply as text, written once for every package.

redis-py answers bytes, or str from a client built to decode. `bot`, `agent` and `memory`
all read Redis, and `agent` and `memory` may not import `bot` (tests/test_architecture.py),
so this one function sits in a package below all of them and imports none of them.
"""

from __future__ import annotations

from typing import overload


@overload
def as_text(raw: bytes | str) -> str: ...
@overload
def as_text(raw: None) -> None: ...
def as_text(raw: bytes | str | None) -> str | None:
    """A Redis reply as text: bytes decoded as UTF-8, text as it is, None as None."""
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else raw
