"""Who may act for a requester: decide their pending question or plan, cancel it, or stop their
run. The requester always; in a shared chat, the configured approvers (user or group ids)."""

from __future__ import annotations


def may_act(
    user_id: str,
    groups: tuple[str, ...],
    requester_id: str,
    is_direct: bool,
    approvers: frozenset[str],
) -> bool:
    if user_id == requester_id:
        return True
    if is_direct:
        return False
    return user_id in approvers or bool(approvers.intersection(groups))
