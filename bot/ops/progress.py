"""A count that shows how far a long command is: rewritten in place on a terminal, a line
every tenth of the way (and at the end) when the output is a file or a pipe."""

from __future__ import annotations

import time
from typing import TextIO


class ProgressLine:
    def __init__(self, stream: TextIO, what: str = "memories", every: float = 0.5) -> None:
        self.stream = stream
        self.what = what
        self.every = every  # seconds between rewrites on a terminal
        self.tty = stream.isatty()
        self.shown_at = 0.0
        self.tenth = -1
        self.drawn = False

    def show(self, done: int, total: int) -> None:
        text = f"embedded {done}/{total} {self.what}"
        if self.tty:
            now = time.monotonic()
            if now - self.shown_at >= self.every or done == total:
                self.shown_at = now
                self.stream.write(f"\r{text}")
                self.stream.flush()
                self.drawn = True
            return
        tenth = 10 * done // total if total else 10
        if tenth != self.tenth:
            self.tenth = tenth
            self.stream.write(f"{text}\n")
            self.stream.flush()

    def end(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
