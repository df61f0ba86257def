"""How the slow tier shares parallel workers (pytest-xdist, `make pytest-slow`).

Each worker is a process of its own, so it starts its own Redis (`redis_server` is
session-scoped) and its own fake servers on ports the kernel picks. Tests that start whole
Parley processes (tests/e2e/) form one group that one worker runs one test at a time, and
tests that burn seconds of CPU (`heavy`: building the model, the MCP conformance suite) form
a second, so no two of either kind fight over two cores. Each group is the slow tier's
longest unit: run as one, they made it as long as their sum. `--dist loadgroup` hands the
groups out first, to two workers, and the other workers share the rest test by test.
xdist names the group by a suffix its own hook appends to each test's id, which pytest 9.2
ignores (its `nodeid` no longer reads `_nodeid`): constraints.txt pins pytest 9.1 for it, and
a worker refuses to run a group that is not one.
"""

from __future__ import annotations

import pytest

ONE_AT_A_TIME = "one-at-a-time"
HEAVY = "heavy"
WHOLE_PROCESSES = "tests/e2e/"


def pytest_configure(config: pytest.Config) -> None:
    # xdist declares it too; declared here as well so `-p no:xdist` runs stay warning-free
    config.addinivalue_line("markers", "xdist_group(name): tests one worker runs in sequence")


def group_of(item: pytest.Item) -> str | None:
    """The xdist group a test runs in, one test at a time; None: any worker, in parallel."""
    if item.nodeid.startswith(WHOLE_PROCESSES):
        return ONE_AT_A_TIME
    if item.get_closest_marker("heavy") is not None:
        return HEAVY
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if group := group_of(item):
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """xdist's loadgroup knows a group only by a suffix its own hook appends to each test's
    id; a pytest whose ids ignore that (pytest 9.2 with xdist 3.8: `nodeid` no longer reads
    `_nodeid`) silently spreads the group over every worker. Refuse to run instead."""
    if not getattr(session.config.option, "loadgroup", False):  # set on xdist workers only
        return
    for item in session.items:
        if (group := group_of(item)) and not item.nodeid.endswith(f"@{group}"):
            raise pytest.UsageError(
                f"{item.nodeid} is not in the {group} xdist group: this pytest and "
                "pytest-xdist do not group tests (see constraints.txt)"
            )
