"""Hints name `parley` as the person can type it: `.venv/bin/parley` after `make run`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bot.ops.invocation import parley_command


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with `.venv/bin/parley`, the program this process runs as."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "parley"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "run"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    return script


def test_a_parley_off_path_is_named_by_its_path_from_here(venv: Path) -> None:
    assert parley_command() == os.path.join(".venv", "bin", "parley")


def test_a_parley_on_path_is_named_plainly(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{venv.parent}:/usr/bin:/bin")
    assert parley_command() == "parley"


def test_another_parley_on_path_is_not_this_one(
    venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "parley").write_text("#!/bin/sh\n")
    (other / "parley").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}:/usr/bin:/bin")
    assert parley_command() == os.path.join(".venv", "bin", "parley")


def test_from_another_folder_the_whole_path(
    venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    assert parley_command() == str(venv)


def test_run_as_a_module_the_environments_parley_is_named(
    venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["/somewhere/bot/cli.py", "doctor"])
    monkeypatch.setattr(sys, "executable", str(venv.parent / "python"))
    assert parley_command() == os.path.join(".venv", "bin", "parley")
