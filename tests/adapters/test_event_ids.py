"""Each platform's event ids are made in one place and keep their form across releases: the
inbox takes an id once, so a delivery retried across a deploy must come back with the id the
release before gave it, or it would be taken twice."""

from __future__ import annotations

from adapters.slack.traits import action_event, command_event, event_id
from adapters.telegram.inbound import update_event


def test_a_slack_delivery_keeps_the_id_it_had() -> None:
    assert event_id("Ev0123ABC") == "slack:Ev0123ABC"
    assert event_id("1711.000200") == "slack:1711.000200"  # an event with no event_id: its ts
    assert action_event("1711.5", "UANA") == "slack:action:1711.5:UANA"
    assert command_event("13345224609.738474920") == "slack:command:13345224609.738474920"


def test_a_telegram_update_keeps_the_id_it_had() -> None:
    assert update_event(812345678) == "tg:812345678"
