"""Runs every benchmark module in this folder (each has an async or sync `main()`)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def main(names: list[str]) -> int:
    folder = Path(__file__).parent
    modules = sorted(
        m.name for m in pkgutil.iter_modules([str(folder)]) if m.name.startswith("bench_")
    )
    for name in names or modules:
        module = importlib.import_module(f"bench.{name.removesuffix('.py')}")
        print(f"== {module.__name__}: {(module.__doc__ or '').strip().splitlines()[0]}", flush=True)
        result = module.main()
        if inspect.isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
