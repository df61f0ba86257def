from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.telegram import FakeTelegram


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake
