"""How the person at this terminal runs `parley`, for hints that say what to type next.

`make run` starts `.venv/bin/parley`, which is not on PATH: a hint saying `parley doctor`
would fail when typed. A `parley` installed on PATH (`pip install .` in an active
environment) is named plainly.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def parley_command() -> str:
    """`parley` if that names this program on PATH; else its path as typed from here."""
    started = Path(sys.argv[0])
    script = started if started.name == "parley" else Path(sys.executable).parent / "parley"
    found = shutil.which("parley")
    if found is not None and Path(found).resolve() == script.resolve():
        return "parley"
    try:
        return str(script.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def source_checkout() -> Path | None:
    """The source tree Parley runs from when it was set up with `make setup` (its Makefile and
    .env.example beside the packages); None for an installed wheel (`pip install .`), which
    has neither, so hints must not send its user to them."""
    root = Path(__file__).resolve().parents[2]
    found = (root / "Makefile").is_file() and (root / ".env.example").is_file()
    return root if found else None


def settings_hint() -> str:
    if source_checkout() is not None:
        return "settings are read from .env (copy .env.example, which lists them all)"
    return (
        "settings are read from the environment or from .env in this directory "
        "(one NAME=value line each)"
    )
