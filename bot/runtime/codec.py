"""How a stored record goes into Redis and comes back: one way for every record.

A record (a dataclass or a pydantic model, or a union of them) is JSON written and read by a
pydantic `TypeAdapter` (the inbox's approach), so every store validates what it reads the
same way and a record that does not fit fails as one `ValueError` (pydantic's
ValidationError is one). A field with an alias is stored under its alias, so a record can
keep the short names it was first stored with. `as_text` is the one place a Redis reply (bytes, or str from a
client that decodes) becomes text.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from pydantic import TypeAdapter

T = TypeVar("T")


class Codec(Generic[T]):
    """JSON for records of one type, written compactly and read back validated."""

    def __init__(self, kind: Any) -> None:
        self._adapter: TypeAdapter[T] = TypeAdapter(kind)

    def encode(self, record: T) -> bytes:
        return self._adapter.dump_json(record, by_alias=True)

    def decode(self, raw: str | bytes) -> T:
        return self._adapter.validate_json(raw)


@overload
def as_text(raw: bytes | str) -> str: ...
@overload
def as_text(raw: None) -> None: ...
def as_text(raw: bytes | str | None) -> str | None:
    """A Redis reply as text: bytes decoded as UTF-8, text as it is, None as None."""
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else raw
