"""How the slow tier shares parallel workers (pytest-xdist, `make pytest-slow`).

Each worker is a process of its own, so it starts its own Redis (`redis_server` is
session-scoped) and its own fake servers on ports the kernel picks. Tests that start whole
Parley processes (tests/e2e/) or burn seconds of CPU (`heavy`) form one group that one worker
runs one test at a time, so two of them never fight over two cores; `--dist loadgroup` hands
the group out first (the largest unit), and the other workers share the rest test by test.
xdist names the group by a suffix its own hook appends to each test's id, which pytest 9.2
ignores (its `nodeid` no longer reads `_nodeid`): constraints.txt pins pytest 9.1 for it, and
a worker refuses to run a group that is not one.
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


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """xdist's loadgroup knows a group only by a suffix its own hook appends to each test's
    id; a pytest whose ids ignore that (pytest 9.2 with xdist 3.8: `nodeid` no longer reads
    `_nodeid`) silently spreads the group over every worker. Refuse to run instead."""
    if not getattr(session.config.option, "loadgroup", False):  # set on xdist workers only
        return
    for item in session.items:
        if one_at_a_time(item) and not item.nodeid.endswith(f"@{ONE_AT_A_TIME}"):
            raise pytest.UsageError(
                f"{item.nodeid} is not in the {ONE_AT_A_TIME} xdist group: this pytest and "
                "pytest-xdist do not group tests (see constraints.txt)"
            )
