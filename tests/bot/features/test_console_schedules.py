"""The console's scheduler is a whole schedule book: a method the agent's book protocol gains
must reach the console too, or the schedule tools say "not available here" there."""

from __future__ import annotations

import asyncio
import inspect
import io
import logging
from pathlib import Path

import pytest

from agent.protocols import RunContext, ScheduleBook, ScheduleRefused
from bot.config import Settings
from bot.features.schedules.console import ConsoleScheduler, ConsoleSchedules, ended
from bot.features.schedules.store import BookOf, ScheduleStore
from bot.runtime.keys import Keys
from bot.wiring.runtime import Scheduling
from tests.helpers import until
from tests.private_redis import private_redis


def test_the_console_scheduler_offers_every_method_of_the_schedule_book() -> None:
    store = ScheduleStore(redis=None, keys=Keys("t"))  # type: ignore[arg-type]  # never called
    console = ConsoleScheduler(io.StringIO(), store)
    assert isinstance(console, ScheduleBook)  # what the schedule tools check
    wanted = {
        n for n, _ in inspect.getmembers(ScheduleBook, inspect.isfunction) if not n.startswith("_")
    }
    assert {"create_schedule", "list_schedules", "cancel_schedule"} <= wanted
    assert wanted <= {n for n, _ in inspect.getmembers(ConsoleScheduler, inspect.isfunction)}


async def test_a_scheduler_with_no_book_refuses_schedules_in_words_for_the_model() -> None:
    """Both schedulers get the book's methods from one place (BookOf); with no book the
    refusal is a ScheduleRefused the schedule tools pass on, not an assertion."""
    context = RunContext(
        conversation_id="console:-:me:-", user_id="me", chat_id="me", platform="console"
    )
    with pytest.raises(ScheduleRefused, match="not available here"):
        await ConsoleScheduler(io.StringIO()).list_schedules(context)
    assert issubclass(Scheduling, BookOf) and issubclass(ConsoleScheduler, BookOf)


def test_leaving_says_how_many_schedules_end() -> None:
    assert ended(1) == "(1 schedule made here ends with this console session.)"
    assert ended(2) == "(2 schedules made here end with this console session.)"


@pytest.mark.process
async def test_the_console_clock_outlives_redis_going_away_and_says_so_once_each_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: a warning on every failed pass while Redis was away, and nothing once it was back."""
    caplog.set_level(logging.INFO, logger="bot.features.schedules.console")
    async with private_redis(tmp_path) as server:
        client = server.client()
        schedules = ConsoleSchedules(client, Settings.load(env_file=None), "s1", poll=0.05)
        schedules.start()
        beat = schedules.heartbeat
        try:
            await until(lambda: beat.state == "ok" and beat.backoff.failures == 0)
            await server.down()
            await until(lambda: beat.state == "degraded", within=20)
            await asyncio.sleep(0.5)  # several failed passes
            await server.up()
            await until(lambda: beat.state == "ok", within=20)
            assert await schedules.close() == 0
        finally:
            await client.aclose()
    said = [r.getMessage() for r in caplog.records if r.name == "bot.features.schedules.console"]
    assert [line.split(" (")[0].split(" after")[0] for line in said] == [
        "console schedules degraded",
        "console schedules recovered",
    ]
