"""Who is behind a Slack event: the workspace the person belongs to and its organisation.

Bolt's `actor_team_id` is the person's own team in a Slack Connect channel, and empty for an
org-wide (Enterprise Grid) install, where `authorizations[0].team_id` is null: there the
workspace is the one the event names (`event.user_team`, `event.team`, the envelope's
`team_id`). The enterprise is the person's organisation: Bolt's actor enterprise, else (not
in a Slack Connect channel) the install's. Also here: the one log line for an event Parley
decides not to answer.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

log = logging.getLogger(__name__)

REMEMBERED_SKIPS = 2_000  # event ids already logged, so a retried delivery is not logged again


@dataclass(frozen=True, kw_only=True)
class Person:
    team: str | None  # the person's workspace; None when Slack does not say
    enterprise: str | None  # their Enterprise Grid organisation, if any


def person_of(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> Person:
    enterprise = _id(context.actor_enterprise_id)
    if body.get("is_ext_shared_channel") is not True:
        enterprise = enterprise or _id(context.enterprise_id) or _id(body.get("enterprise_id"))
    # else only Bolt's actor enterprise: the install's or the host's organisation is not a
    # Slack Connect guest's, and would share its team memories with them
    team = _id(context.actor_team_id)
    if (
        team is None
        and context.is_enterprise_install
        and body.get("is_ext_shared_channel") is not True
    ):
        # an org-wide install: the workspace the event happened in is the person's
        for candidate in (event.get("user_team"), event.get("team"), body.get("team_id")):
            if (found := _id(candidate)) and found.startswith("T"):
                team = found
                break
    return Person(team=team, enterprise=enterprise)


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(kw_only=True)
class Skips:
    """Says once per event why Parley does not answer it (INFO; DEBUG for chatter that was
    never addressed to Parley, which a busy workspace sends all day)."""

    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def __call__(self, body: dict[str, Any], reason: str, *, quiet: bool = False) -> None:
        key = str(body.get("event_id") or "")
        if key:
            if key in self._seen:
                return
            self._seen[key] = None
            while len(self._seen) > REMEMBERED_SKIPS:
                self._seen.popitem(last=False)
        event = body.get("event") if isinstance(body.get("event"), dict) else {}
        kind = str((event or {}).get("type") or body.get("type") or "command")
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "slack %s %s not answered: %s",
            kind,
            key or "-",
            reason,
        )
