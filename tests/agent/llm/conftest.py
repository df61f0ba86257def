from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama


@pytest.fixture
async def hosted() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
async def local() -> AsyncIterator[FakeOllama]:
    async with FakeOllama(models=["qwen2.5:7b"]) as fake:
        yield fake
