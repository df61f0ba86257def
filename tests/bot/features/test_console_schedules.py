"""The console's scheduler is a whole schedule book: a method the agent's book protocol gains
must reach the console too, or the schedule tools say "not available here" there."""

from __future__ import annotations

import inspect
import io

from agent.protocols import ScheduleBook
from bot.features.schedules.console import ConsoleScheduler, ended
from bot.features.schedules.store import ScheduleStore
from bot.runtime.keys import Keys


def test_the_console_scheduler_offers_every_method_of_the_schedule_book() -> None:
    store = ScheduleStore(redis=None, keys=Keys("t"))  # type: ignore[arg-type]  # never called
    console = ConsoleScheduler(io.StringIO(), store)
    assert isinstance(console, ScheduleBook)  # what the schedule tools check
    wanted = {
        n for n, _ in inspect.getmembers(ScheduleBook, inspect.isfunction) if not n.startswith("_")
    }
    assert {"create_schedule", "list_schedules", "cancel_schedule"} <= wanted
    assert wanted <= {n for n, _ in inspect.getmembers(ConsoleScheduler, inspect.isfunction)}


def test_leaving_says_how_many_schedules_end() -> None:
    assert ended(1) == "(1 schedule made here ends with this console session.)"
    assert ended(2) == "(2 schedules made here end with this console session.)"
