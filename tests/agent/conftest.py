"""Fixtures for the agent core tests."""

from __future__ import annotations

import pytest

from agent.protocols import RunContext
from tests.agent.doubles import ListMemory, ListScheduler


@pytest.fixture
def ctx() -> RunContext:
    return RunContext(
        conversation_id="telegram:42",
        platform="telegram",
        user_id="42",
        chat_id="42",
        user_name="Ada",
    )


@pytest.fixture
def memory() -> ListMemory:
    return ListMemory()


@pytest.fixture
def scheduler() -> ListScheduler:
    return ListScheduler()
