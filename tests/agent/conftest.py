"""Fixtures for the agent core tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.llm.anthropic import AnthropicModel
from agent.protocols import RunContext
from tests.agent.doubles import ListMemory, ListScheduler
from tests.fakes.anthropic import FakeAnthropic

GENERATIONS = ["claude-test", "claude-sonnet-5-5"]  # a 4.x stand-in, the current one


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
async def hosted(request: pytest.FixtureRequest) -> AsyncIterator[FakeAnthropic]:
    """The fake Messages API; `hosted.model` is the Claude model the test's clients name (a
    module with `STRICT_TOO = True` runs each test once more on the current generation,
    which the fake answers in strict mode: `tests/fakes/anthropic_strict.py`)."""
    async with FakeAnthropic() as fake:
        fake.model = getattr(request, "param", fake.model)
        yield fake


@pytest.fixture
async def model(hosted: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    made = AnthropicModel(api_key="sk-ant-test", model=hosted.model, base_url=hosted.url)
    yield made
    await made.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`STRICT_TOO = True`: each test that talks to the fake Messages API runs on both
    generations, except those the module's `NOT_STRICT` names (with why)."""
    if not getattr(metafunc.module, "STRICT_TOO", False) or "hosted" not in metafunc.fixturenames:
        return
    if metafunc.function.__name__ in getattr(metafunc.module, "NOT_STRICT", {}):
        metafunc.parametrize("hosted", GENERATIONS[:1], indirect=True, ids=["4.x"])
        return
    metafunc.parametrize("hosted", GENERATIONS, indirect=True, ids=["4.x", "5.5-strict"])
