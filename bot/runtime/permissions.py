"""Who may act for a requester: decide their pending question or plan, cancel it, stop their
run or their followed tasks, manage their schedule. The requester always; in a shared chat,
the configured approvers (user or group ids). One rule for all of them: it sits here, below
the conversation and the features, so each of them uses it."""

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
