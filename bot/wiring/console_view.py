"""What `parley console` shows while a run works: a spinner with the current step, then the
answer as it is written.

On a terminal the status line is redrawn in place with a spinner; elsewhere (a pipe) it is
printed once per change. The answer's text is printed as it arrives, so the finished answer
is not printed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass, field
from typing import TextIO

from agent.protocols import ProgressEvent

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_SECONDS = 0.1


@dataclass(kw_only=True)
class ConsoleView:
    out: TextIO
    prefix: str = "parley> "
    written: str = ""  # the answer printed so far
    _status: str = ""
    _spinner: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def tty(self) -> bool:
        isatty = getattr(self.out, "isatty", None)
        return bool(isatty and isatty())

    async def progress(self, event: ProgressEvent) -> None:
        if event.kind == "text_delta":
            await self._stop_spinner()
            if not self.written:
                self._write(self.prefix)
            text = event.detail.get("text", "")
            self.written += text
            self._write(text)
        elif event.kind == "text_reset":
            if self.written:
                self._write("\n")  # what was printed stays; it was the model thinking aloud
                self.written = ""
            self._set_status(event.detail.get("status") or "Thinking…")
        elif event.kind == "step_started":
            self._set_status("Thinking…")
        elif event.kind == "tool_started" and event.tool:
            self._set_status(f"Using {event.tool}…")

    async def finish(self, answer: str) -> None:
        """End the run's display: the answer, unless it was already printed as it came."""
        await self._stop_spinner()
        if self.written and answer.startswith(self.written.strip()):
            rest = answer[len(self.written.strip()) :]
            self._write(f"{rest}\n")
        else:
            if self.written:
                self._write("\n")
            self._write(f"{self.prefix}{answer}\n")
        self.written = ""

    async def close(self) -> None:
        await self._stop_spinner()

    def _set_status(self, status: str) -> None:
        if status == self._status:
            return
        self._status = status
        if not self.tty:
            self._write(f"… {status}\n")
        elif self._spinner is None:
            self._spinner = asyncio.create_task(self._spin())

    async def _spin(self) -> None:
        for frame in itertools.cycle(FRAMES):
            self._write(f"\r\033[K{frame} {self._status}")
            await asyncio.sleep(SPIN_SECONDS)

    async def _stop_spinner(self) -> None:
        task, self._spinner = self._spinner, None
        self._status = ""
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._write("\r\033[K")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
