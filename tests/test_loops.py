"""The loop primitive every long-running loop runs on: a pass raced against the stop, one
backoff, one heartbeat that says degraded and recovered once each, one lifecycle."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from loops import Backoff, Heartbeat, Running, Stopped, race, repeat


class Away(Exception):
    """The loop's dependency is not there."""


def away(exc: BaseException) -> str | None:
    return "dependency away" if isinstance(exc, Away) else None


def beat(name: str = "poller") -> Heartbeat:
    return Heartbeat(name, every=5.0, away=away, backoff=Backoff(first=0.001, cap=0.004))


async def test_a_loop_outlives_its_dependency_going_away_and_says_so_once_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="loops")
    stop = asyncio.Event()
    heartbeat = beat()
    # up, away for five passes, up, away for three, up: two outages, four lines
    script = ["ok", *["away"] * 5, "ok", *["away"] * 3, "ok"]
    seen: list[str] = []

    async def one_pass() -> None:
        seen.append(script[len(seen)])
        if len(seen) == len(script):
            stop.set()
        if seen[-1] == "away":
            raise Away

    await asyncio.wait_for(repeat(stop, heartbeat, one_pass, 0.0), 5)
    assert seen == script and heartbeat.state == "ok"
    said = [r.getMessage().split(" (")[0].split(" after")[0] for r in caplog.records]
    assert said == ["poller degraded", "poller recovered"] * 2


async def test_a_failure_that_is_not_an_outage_is_traced_once_per_degradation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="loops")
    stop = asyncio.Event()
    passes = 0

    async def one_pass() -> None:
        nonlocal passes
        passes += 1
        if passes == 4:
            stop.set()
        raise KeyError("bug")

    await asyncio.wait_for(repeat(stop, beat(), one_pass, 0.0), 5)
    traced = [r for r in caplog.records if r.exc_info]
    assert passes == 4 and len(traced) == 1 and traced[0].getMessage() == "poller pass failed"
    assert "poller degraded (KeyError)" in caplog.text


async def test_a_failure_may_ask_for_its_own_wait() -> None:
    """A rate limit's retry_after replaces the backoff (Telegram's RetryAfter, say)."""
    stop = asyncio.Event()
    times: list[float] = []

    async def one_pass() -> None:
        times.append(time.monotonic())
        if len(times) == 2:
            stop.set()
            return
        raise Away

    await asyncio.wait_for(repeat(stop, beat(), one_pass, 0.0, asked_wait=lambda _: 0.3), 5)
    assert times[1] - times[0] >= 0.25


async def test_the_stop_wins_against_a_pass_that_turns_its_cancellation_into_a_failure() -> None:
    """As an HTTP client whose read timeout fires with the cancel: the pass ends in a timeout
    error; the loop must not take that for a failed pass and try again."""
    stop = asyncio.Event()
    started = asyncio.Event()
    passes = 0

    async def long_poll() -> None:
        nonlocal passes
        passes += 1
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            raise TimeoutError("read timed out") from None

    loop = asyncio.create_task(repeat(stop, beat(), long_poll, 0.0))
    await asyncio.wait_for(started.wait(), 5)
    began = time.monotonic()
    stop.set()
    await asyncio.wait_for(loop, 5)
    assert passes == 1 and time.monotonic() - began < 1


async def test_race_gives_the_result_or_stopped() -> None:
    stop = asyncio.Event()

    async def answer() -> int:
        return 42

    assert await race(stop, answer()) == 42
    stop.set()
    with pytest.raises(Stopped):
        await race(stop, answer())  # the coroutine is closed, not left un-awaited


async def test_a_pass_that_is_not_interrupted_runs_to_its_end() -> None:
    stop = asyncio.Event()
    finished: list[bool] = []

    async def one_pass() -> None:
        stop.set()
        await asyncio.sleep(0.05)
        finished.append(True)

    await asyncio.wait_for(repeat(stop, beat(), one_pass, 0.0, interrupt=False), 5)
    assert finished == [True]


async def test_running_ends_its_loops_and_names_the_one_that_ignores_cancellation() -> None:
    stop = asyncio.Event()
    stubborn_may_end = asyncio.Event()

    async def polite() -> None:
        await stop.wait()

    async def stubborn() -> None:
        while not stubborn_may_end.is_set():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    polite_beat, stubborn_beat = beat("polite"), beat("stubborn")
    async with Running(stop, grace=0.05) as loops:
        polite_task = loops.start(polite(), polite_beat)
        stubborn_task = loops.start(stubborn(), stubborn_beat)
        assert loops.running
    assert stop.is_set() and polite_task.done() and polite_beat.state == "stopped"
    assert loops.left == {stubborn_task} and not stubborn_task.done()
    stubborn_may_end.set()
    stubborn_task.cancel()
    await asyncio.wait({stubborn_task}, timeout=5)
    assert stubborn_task.done()


async def test_a_loop_that_raises_out_is_dead(caplog: pytest.LogCaptureFixture) -> None:
    heartbeat = beat("broken")

    async def broken() -> None:
        raise RuntimeError("no")

    async with Running(grace=0.05) as loops:
        task = loops.start(broken(), heartbeat)
        await asyncio.wait({task})
    assert heartbeat.state == "dead" and heartbeat.reason == "RuntimeError"
    assert "broken died; restart the process" in caplog.text


def test_one_backoff_formula_doubles_up_to_its_cap_with_jitter() -> None:
    backoff = Backoff(first=1.0, cap=8.0)
    delays = [backoff.next() for _ in range(6)]
    for delay, ceiling in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    backoff.reset()
    assert backoff.next() <= 1.0
