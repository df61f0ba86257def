from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama


@pytest.fixture
async def hosted(request: pytest.FixtureRequest) -> AsyncIterator[FakeAnthropic]:
    """The fake Messages API; `hosted.model` is the Claude model the test's clients name (a
    module with `STRICT_TOO = True` runs (`tests/agent/conftest.py`) each test once more on the current generation,
    which the fake answers in strict mode: `tests/fakes/anthropic_strict.py`)."""
    async with FakeAnthropic() as fake:
        fake.model = getattr(request, "param", fake.model)
        yield fake


@pytest.fixture
async def local() -> AsyncIterator[FakeOllama]:
    async with FakeOllama(models=["qwen2.5:7b"]) as fake:
        yield fake
