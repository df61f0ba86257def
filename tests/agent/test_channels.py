"""read_channel's time window and output: bounded back in time and in size, newest kept."""

from __future__ import annotations

import pytest

from agent.channels import MAX_SINCE, ChannelMessage, parse_since, render
from agent.tools import ToolError

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("since", "back"), [("30m", 1800), ("2h", 7200), ("1 day", 86_400), ("90 minutes", 5400)]
)
def test_spans(since: str, back: float) -> None:
    assert parse_since(since, NOW) == NOW - back


def test_iso_times_and_the_one_week_cap() -> None:
    assert parse_since("2026-01-01T00:00:00Z", NOW) == NOW - MAX_SINCE  # far back: capped
    assert parse_since("2027-01-15T07:00:00+00:00", 1_800_000_000.0) == 1_799_996_400.0
    with pytest.raises(ToolError):
        parse_since("last tuesday", NOW)


def test_render_keeps_the_newest_within_the_limit() -> None:
    messages = [
        ChannelMessage(author="Bob", text=f"note {n} " + "x" * 40, at=NOW + n) for n in range(10)
    ]
    text = render(messages, limit=200)
    assert "note 9" in text and "note 0" not in text
    assert text.startswith("(") and "older messages left out" in text
    assert render([]) == "No messages in that time."
