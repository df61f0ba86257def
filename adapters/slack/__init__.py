"""Slack: the adapter (`adapter.py`) and the parts it is made of."""

from adapters.slack.adapter import ADDRESSING, SlackAdapter
from adapters.slack.config import SlackConfig

__all__ = ["ADDRESSING", "SlackAdapter", "SlackConfig"]
