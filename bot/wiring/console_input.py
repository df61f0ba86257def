"""The terminal side of `parley console`: lines typed (read on a thread, so Ctrl-C never
waits for Enter), yes and no, and Ctrl-C stopping a request."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from adapters.base import Inbound
from bot.conversation.yes_no import verdict

NO = {"n", "no", "nope", "nah", "reject", "rejected", "don't", "dont", "stop", "cancel"}
CTRL_C = "\x03"  # what `LineReader.readline` returns after Ctrl-C


def yes_or_no(text: str) -> bool | None:
    """True for a clear yes, False for a no (Enter, or a no with a reason), None otherwise.

    A yes is read as in the chats (`yes_no.verdict`): "yes, but to Carol" is no yes.
    """
    if not text.strip():
        return False
    typed = verdict(text)
    if typed is not None:
        return typed
    words = re.findall(r"[a-z']+", text.lower())
    return False if words and words[0] in NO else None


class LineReader:
    """Lines from a text stream, read on a daemon thread so Ctrl-C never waits for Enter."""

    def __init__(self, stream: TextIO) -> None:
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._ended = False
        loop = asyncio.get_running_loop()

        def pump() -> None:
            for line in iter(stream.readline, ""):
                if not _hand_over(loop, self._lines, line):
                    return
            _hand_over(loop, self._lines, None)

        threading.Thread(target=pump, name="console-input", daemon=True).start()

    async def readline(self) -> str | None:
        """The next line without its newline; None at the end of input; CTRL_C after Ctrl-C."""
        if self._ended:
            return None
        line = await self._lines.get()
        if line is None:
            self._ended = True
            return None
        return line.rstrip("\n")

    def interrupt(self) -> None:
        self._lines.put_nowait(CTRL_C)


def _hand_over(
    loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None], line: str | None
) -> bool:
    try:
        loop.call_soon_threadsafe(lines.put_nowait, line)
    except RuntimeError:  # the console has closed its loop
        return False
    return True


class Chat:
    """The terminal side: what the person types, and Ctrl-C.

    Ctrl-C while a request runs stops it as /cancel and the platforms' stop buttons do (at the
    run's next step, saying what was stopped); a second Ctrl-C cancels it outright. At the
    prompt Ctrl-C leaves.
    """

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.out = stdout
        self.reader = LineReader(stdin)
        self.request: asyncio.Task[None] | None = None
        self.on_stop: Callable[[], None] | None = None  # asks the running run to stop
        self._stopping = False

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    async def ask(self, prompt: str) -> str | None:
        """A stripped line; None at the end of input; CTRL_C after Ctrl-C (never a typed line)."""
        print(prompt, end="", file=self.out, flush=True)
        line = await self.reader.readline()
        return line if line in (None, CTRL_C) else line.strip()

    async def ask_or(self, prompt: str, due: asyncio.Queue[Inbound]) -> str | Inbound | None:
        """As `ask`, unless one of Parley's own objectives (a schedule's slot) comes due first:
        then that, on a line of its own; the prompt is shown again after it."""
        print(prompt, end="", file=self.out, flush=True)
        reading = asyncio.create_task(self.reader.readline())
        waiting = asyncio.create_task(due.get())
        await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
        for task in (reading, waiting):
            task.cancel()  # neither loses what it got: a queue's get gives up cleanly
        await asyncio.gather(reading, waiting, return_exceptions=True)
        if not reading.cancelled():
            if not waiting.cancelled():
                due.put_nowait(waiting.result())  # both at once: the typed line first
            line = reading.result()
            return line if line in (None, CTRL_C) else line.strip()
        self.say()
        return waiting.result()

    def interrupt(self) -> None:
        if self.request is None or self.request.done():
            self.reader.interrupt()
        elif self.on_stop is not None and not self._stopping:
            self._stopping = True
            self.on_stop()
        else:
            self.request.cancel()

    async def attempt(self, work: Coroutine[Any, Any, None]) -> None:
        """Run one request; Ctrl-C stops it, a second Ctrl-C cancels it."""
        self._stopping = False
        self.request = asyncio.create_task(work)
        try:
            await asyncio.wait({self.request})
        finally:
            task, self.request = self.request, None
            if not task.done():
                task.cancel()
        if task.cancelled():
            self.say("\n(cancelled)")
            return
        task.result()
