"""Building a Slack adapter is cheap: Bolt is given the app's name, so it does not read every
calling frame's source file to guess one (inspect.stack(), about 0.1 s per adapter)."""

from __future__ import annotations

import inspect

import pytest

from adapters.slack import SlackAdapter, SlackConfig


def test_building_a_slack_adapter_does_not_walk_the_call_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(*args: object, **kwargs: object) -> list[inspect.FrameInfo]:
        raise AssertionError("inspect.stack() called while building the adapter")

    monkeypatch.setattr(inspect, "stack", refused)
    adapter = SlackAdapter(config=SlackConfig(bot_token="xoxb-test-token"))
    assert adapter is not None
