"""The schedule tool's approval line and refusals, without a host."""

from __future__ import annotations

from dataclasses import replace

from agent.protocols import RunContext
from agent.schedule_tools import schedule_tools

SLACK_THREAD = RunContext(
    conversation_id="slack:T1:C1:1.5",
    platform="slack",
    user_id="U1",
    chat_id="C1",
    is_direct=False,
    timezone="America/Argentina/Buenos_Aires",
)


def test_the_prompt_line_names_zone_runs_and_standing_permission_within_its_limit() -> None:
    schedule, _, _ = schedule_tools(60)
    args = {"when": "30 8 * * *", "objective": "x", "allow_tools": ["send_email", "post_update"]}
    line = schedule.describe_call(args, SLACK_THREAD)
    assert line.startswith("Runs in this thread, time zone America/Argentina/Buenos_Aires; next:")
    assert line.count(" 08:30:00 -03") == 3
    assert line.endswith("May act without asking: send_email, post_update.")
    assert len(line) <= 200  # what an approval prompt shows of a description
    # the owner's zone: Slack's profile first, then the one they named, then UTC
    slack = schedule.describe_call({**args, "timezone": "Asia/Tokyo"}, SLACK_THREAD)
    assert "time zone America/Argentina/Buenos_Aires" in slack
    telegram = replace(SLACK_THREAD, platform="telegram", timezone=None)
    named = schedule.describe_call({**args, "timezone": "Asia/Tokyo"}, telegram)
    assert "time zone Asia/Tokyo" in named and named.count(" 08:30:00 JST") == 3
    assert "time zone UTC" in schedule.describe_call(args, telegram)


def test_only_a_usable_schedule_asks_for_approval() -> None:
    schedule, listing, cancel = schedule_tools(300)
    assert schedule.needs_approval({"when": "*/5 * * * *", "objective": "x"})
    assert not schedule.needs_approval({"when": "*/2 * * * *", "objective": "x"})  # refused
    assert not schedule.needs_approval({"when": "whenever", "objective": "x"})
    assert not listing.needs_approval({}) and not cancel.needs_approval({"id": "x"})
