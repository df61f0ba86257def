"""A bounded stop: a SIGTERM'd process exits within the drain timeout plus a grace.

Runs in flight get `PARLEY_DRAIN_TIMEOUT`. Then each step of the stop has a share of
`PARLEY_STOP_GRACE` (cancelled runs, the loops, leftovers; the rest is for closing), and what
ignores its cancellation is named in one `still running after drain:` line and left behind:
entries are still handed back and connections closed, and the process exits (status 0).
Should the stop itself hang (a tool that blocks the event loop, a dependency that never
answers), a watchdog thread ends the process `drain + grace` seconds after the signal with
status 3, naming every unfinished task and where the main thread is: an orchestrator's
kill -9 would lose that line, and an operator would only see a hang.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

log = logging.getLogger(__name__)

STUCK_EXIT = 3  # the exit status of a stop the watchdog had to end
STILL_RUNNING = "still running after drain: %s"
_ROOT = str(Path(__file__).resolve().parents[2])
_ASYNCIO = str(Path(asyncio.__file__).parent)


def where(task: asyncio.Task[object]) -> str:
    """A task's name and the innermost line it waits at, asyncio's own frames left out."""
    stack = _awaiting(task.get_coro())
    ours = [frame for frame in stack if not frame.f_code.co_filename.startswith(_ASYNCIO)]
    if not (stack := ours or stack):
        return task.get_name()
    code, line = stack[-1].f_code, stack[-1].f_lineno
    return f"{task.get_name()} in {code.co_name} at {_place(code.co_filename, line)}"


def _awaiting(coro: object) -> list[FrameType]:
    """The frames of a suspended coroutine down the chain of what it awaits (a task's own
    `get_stack` gives only the outermost one)."""
    frames: list[FrameType] = []
    while coro is not None and len(frames) < 200:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def describe(tasks: Iterable[asyncio.Task[object]]) -> str:
    return "; ".join(sorted(where(task) for task in tasks if not task.done())) or "nothing"


async def settle(tasks: Iterable[asyncio.Task[object]], within: float) -> set[asyncio.Task[object]]:
    """Cancel `tasks` and wait up to `within` seconds for them; those still running are
    returned and left alone (awaiting a task that ignores cancellation never ends)."""
    pending = {task for task in tasks if not task.done()}
    for task in pending:
        task.cancel()
    if not pending:
        return set()
    _, left = await asyncio.wait(pending, timeout=within)
    return left


async def leave_behind(within: float) -> None:
    """The stop's last step, before asyncio.run's own: cancel what still runs and wait up to
    `within` seconds. asyncio.run would wait for ever on a task that ignores its cancellation,
    so those are named and the process ends here (status 0: the stop itself was orderly)."""
    current = asyncio.current_task()
    if left := await settle((t for t in asyncio.all_tasks() if t is not current), within):
        log.error(STILL_RUNNING + "; exiting without it", describe(left))
        _flush()
        os._exit(0)


class Watchdog:
    """Ends the process `within` seconds after `arm()`, naming what still ran.

    The thread is started up front so that `arm()` is safe in a signal handler: it only
    sets an event, where starting a thread there could wait on a lock the interrupted code
    holds."""

    def __init__(self, within: float) -> None:
        self.within = within
        self._armed = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        threading.Thread(target=self._watch, name="stop-watchdog", daemon=True).start()

    def arm(self) -> None:
        self._armed.set()

    def _watch(self) -> None:
        self._armed.wait()
        time.sleep(self.within)
        try:
            log.error(
                STILL_RUNNING + "; exiting %.0f s after the signal", self._snapshot(), self.within
            )
            _flush()
        finally:
            os._exit(STUCK_EXIT)

    def _snapshot(self) -> str:
        """The loop's unfinished tasks, and where the main thread is (it may be stuck outside
        the loop); read from this thread, which is good enough for one diagnostic line."""
        parts = []
        if self._loop is not None:
            for _ in range(3):  # the set of tasks may change while it is read
                try:
                    parts.append(describe(asyncio.all_tasks(self._loop)))
                    break
                except RuntimeError:
                    continue
        main = sys._current_frames().get(threading.main_thread().ident or 0)
        if main is not None:
            inner = traceback.extract_stack(main)[-1]
            parts.append(
                f"main thread in {inner.name} at {_place(inner.filename, inner.lineno or 0)}"
            )
        return "; ".join(parts)


def _place(filename: str, line: int) -> str:
    if filename.startswith(_ROOT + os.sep):
        filename = filename[len(_ROOT) + 1 :]
    return f"{filename}:{line}"


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
