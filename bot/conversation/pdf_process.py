"""Reading a PDF in a child process, bounded in time and memory.

A few kilobytes of PDF can hold millions of drawing operators that pypdf walks one by one in
Python, for minutes; a thread cannot be stopped, a process can. The child reads the PDF from
stdin under an address-space limit and answers with one JSON object on stdout; the worker
stops it once it has spent `seconds` of CPU reading (or, starved of CPU, `WALL_FACTOR` times
that in wall time), and the user is told the file took too long to read.
A 16 KiB PDF can drive pypdf past 350 MiB, so the child's address space is capped well
inside a worker pod's memory, and `PdfReader` lets only a few children read at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import resource
import signal
import sys
from dataclasses import dataclass, field

from agent.isolation import drop_privileges
from bot.conversation import documents
from bot.conversation.documents import TOO_MUCH, TooComplex, UnreadableDocument, read_pdf

CHILD_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "TMPDIR")
MIB = 1024 * 1024
STARTUP_SECONDS = 60.0  # for the child to start and load pypdf, before its clock runs
# The limit is the reading's CPU time: on a loaded machine a small PDF's reader waits for a
# core longer than the limit. Wall time stops only a reader that cannot get one at all.
WALL_FACTOR = 4.0
TOO_SLOW = "{name} took too long to read (over {seconds:g} seconds), so I left it unread."
ERRORS: dict[str, type[UnreadableDocument]] = {
    cls.__name__: cls
    for cls in (
        documents.PasswordProtected,
        documents.DamagedDocument,
        documents.Unsupported,
        TooComplex,
    )
}


@dataclass(kw_only=True)
class PdfReader:
    """Reads PDFs in child processes: at most `at_once` at a time in this process, each
    within `memory_mb` of address space and `seconds`."""

    seconds: float = 20.0
    memory_mb: int = 192
    at_once: int = 2
    _slots: asyncio.Semaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.at_once)

    async def read(self, name: str, data: bytes, max_chars: int) -> tuple[str, int]:
        async with self._slots:
            return await read_pdf_apart(
                name, data, max_chars, self.seconds, memory_bytes=self.memory_mb * MIB
            )


async def read_pdf_apart(
    name: str, data: bytes, max_chars: int, seconds: float, *, memory_bytes: int = 192 * MIB
) -> tuple[str, int]:
    """`read_pdf` in a child process; UnreadableDocument also when it overruns."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        name,
        str(max_chars),
        str(memory_bytes),
        str(seconds),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k in CHILD_ENV},  # no tokens or keys
    )
    assert child.stdout is not None
    try:
        # The clock is for reading the file: starting Python and loading pypdf takes seconds
        # on a loaded machine, and a small PDF was refused as too slow to read.
        async with asyncio.timeout(max(seconds, STARTUP_SECONDS)):
            await child.stdout.readline()  # "ready", or b"" if it died
        async with asyncio.timeout(seconds * WALL_FACTOR):
            out, _ = await child.communicate(data)
    except TimeoutError:
        raise TooComplex(TOO_SLOW.format(name=name, seconds=seconds)) from None
    finally:
        if child.returncode is None:  # overran, or the run was cancelled
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
    if child.returncode == -signal.SIGXCPU and not out:
        raise TooComplex(TOO_SLOW.format(name=name, seconds=seconds))  # its CPU time ran out
    try:
        answer = json.loads(out)
    except ValueError:  # died without answering: out of memory
        raise TooComplex(TOO_MUCH.format(name=name)) from None
    if "error" in answer:
        raise ERRORS.get(answer["error"], documents.DamagedDocument)(str(answer["sentence"]))
    return str(answer["text"]), int(answer["pages"])


def main() -> None:
    name, max_chars, memory_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    drop_privileges()  # the file is untrusted: no reading Parley through /proc
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    used = resource.getrusage(resource.RUSAGE_SELF)  # starting up is not reading
    cpu = math.ceil(used.ru_utime + used.ru_stime + float(sys.argv[4]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU ends it
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    data = sys.stdin.buffer.read()
    try:
        text, pages = read_pdf(name, data, max_chars)
        # read_pdf stops after the page that passes max_chars; one page can be huge
        answer: dict[str, object] = {"text": text[: max_chars * 4], "pages": pages}
    except UnreadableDocument as exc:
        answer = {"error": type(exc).__name__, "sentence": exc.sentence}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
