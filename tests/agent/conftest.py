"""Fixtures for the agent core tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.llm.anthropic import AnthropicModel
from agent.protocols import RunContext
from tests.agent.doubles import ListMemory, ListScheduler
from tests.fakes.anthropic import FakeAnthropic


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


@pytest.fixture
async def hosted() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
async def model(hosted: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    made = AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url)
    yield made
    await made.close()
