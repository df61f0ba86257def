"""Where Parley's Telegram messages are, written into the one message id the rest of Parley keeps.

Most sends are one message in the conversation's chat, named by its id as is (`"12"`). Some
are more, and the id then lists every message so that an edit (a decided prompt losing its
buttons) reaches all of them:

    "10,11,12"     a long message in three parts
    "p42:12"       a private answer from a group, sent to person 42's own chat
    "e42:7,e7:8"   a prompt sent as ephemeral messages (Bot API 10.2), one per receiver

The rest of Parley stores the string (a pending decision keeps it, durably) and hands it back
for an edit; only this adapter reads it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Placed:
    """One message Parley posted on Telegram."""

    message_id: int
    private_to: int | None = None  # in that person's private chat, not the conversation's
    receiver: int | None = None  # an ephemeral message in the conversation, for that person

    @property
    def target(self) -> tuple[int | None, int | None]:
        """Messages with the same target are the parts of one message."""
        return self.private_to, self.receiver


def write(placed: list[Placed]) -> str:
    return ",".join(_one(p) for p in placed)


def _one(placed: Placed) -> str:
    if placed.private_to is not None:
        return f"p{placed.private_to}:{placed.message_id}"
    if placed.receiver is not None:
        return f"e{placed.receiver}:{placed.message_id}"
    return str(placed.message_id)


def read(value: str) -> list[Placed]:
    """The messages an id names; what does not parse is left out (an id from before is plain)."""
    found = []
    for part in value.split(","):
        kind, _, rest = part.partition(":") if part[:1] in ("p", "e") else ("", "", part)
        who, _, number = (kind[1:], ":", rest) if kind else ("", "", rest)
        if not number.isdigit() or (kind and not who.lstrip("-").isdigit()):
            continue
        if kind.startswith("p"):
            found.append(Placed(message_id=int(number), private_to=int(who)))
        elif kind.startswith("e"):
            found.append(Placed(message_id=int(number), receiver=int(who)))
        else:
            found.append(Placed(message_id=int(number)))
    return found


def by_target(placed: list[Placed]) -> list[list[Placed]]:
    """The messages grouped by where they are, in order: each group is one message's parts."""
    groups: dict[tuple[int | None, int | None], list[Placed]] = {}
    for each in placed:
        groups.setdefault(each.target, []).append(each)
    return list(groups.values())
