"""Real `parley gateway` processes: a clean stop of the one that polls Telegram releases the
polling lease, and the standby polls within a couple of seconds."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.e2e.test_processes import Cluster, texts, until, world  # noqa: F401
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.e2e


async def test_a_stopped_poller_hands_over_to_the_standby_at_once(
    world: tuple[Cluster, FakeTelegram, Path],  # noqa: F811
    redis,
) -> None:
    cluster, telegram, _ = world
    gateways = [await cluster.start("gateway") for _ in range(2)]
    worker = await cluster.start("worker")
    for process in [*gateways, worker]:
        await cluster.ready(process)
    await until(lambda: len(telegram.method_calls("deleteWebhook")) == 1)
    logs = sorted(cluster.logs.glob("gateway-*.log"))
    holder = next(
        g
        for g, path in zip(gateways, logs, strict=True)
        if b"holding the lease" in path.read_bytes()
    )
    standby = next(g for g in gateways if g is not holder)
    telegram.push(telegram.message(chat_id=42, user_id=42, text="first"))
    await until(lambda: bool(telegram.chat(42)))

    assert await cluster.stop(holder) == 0
    stopped = time.monotonic()
    await until(lambda: len(telegram.method_calls("deleteWebhook")) == 2, within=10)
    assert time.monotonic() - stopped < 4.0  # not the 15 s the lease would take to expire
    assert standby.returncode is None
    telegram.push(telegram.message(chat_id=42, user_id=42, text="second"))
    await until(lambda: len(telegram.chat(42)) == 2)
    await asyncio.sleep(0.5)
    assert texts(telegram, 42) == ["echo: first", "echo: second"]
