"""How a stored record goes into Redis and comes back: one way for every record.

A record (a dataclass or a pydantic model, or a union of them) is JSON written and read by a
pydantic `TypeAdapter` (the inbox's approach), so every store validates what it reads the
same way and a record that does not fit fails as one `ValueError` (pydantic's
ValidationError is one). A field with an alias is stored under its alias, so a record can
keep the short names it was first stored with. `as_text` (a Redis reply, bytes or str, as
text) is written in `replies`, which `agent` and `memory` may import too.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter

from replies import as_text

__all__ = ["Codec", "as_text"]

T = TypeVar("T")


class Codec(Generic[T]):
    """JSON for records of one type, written compactly and read back validated."""

    def __init__(self, kind: Any) -> None:
        self._adapter: TypeAdapter[T] = TypeAdapter(kind)

    def encode(self, record: T) -> bytes:
        return self._adapter.dump_json(record, by_alias=True)

    def decode(self, raw: str | bytes) -> T:
        return self._adapter.validate_json(raw)
