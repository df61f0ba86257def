"""How the slow tier shares parallel workers (pytest-xdist, `make pytest-slow`).

Each worker is a process of its own, so it starts its own Redis (`redis_server` is
session-scoped) and its own fake servers on ports the kernel picks. Tests that start whole
Parley processes (tests/e2e/) or burn seconds of CPU (`heavy`) form one group that one worker
runs one test at a time, so two of them never fight over two cores; `--dist loadgroup` hands
the group out first (the largest unit), and the other workers share the rest test by test.
"""

from __future__ import annotations

import pytest

ONE_AT_A_TIME = "one-at-a-time"
WHOLE_PROCESSES = "tests/e2e/"


def pytest_configure(config: pytest.Config) -> None:
    # xdist declares it too; declared here as well so `-p no:xdist` runs stay warning-free
    config.addinivalue_line("markers", "xdist_group(name): tests one worker runs in sequence")


def one_at_a_time(item: pytest.Item) -> bool:
    return item.nodeid.startswith(WHOLE_PROCESSES) or item.get_closest_marker("heavy") is not None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if one_at_a_time(item):
            item.add_marker(pytest.mark.xdist_group(ONE_AT_A_TIME))
