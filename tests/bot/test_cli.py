from __future__ import annotations

import subprocess
import sys

import pytest

from bot.cli import COMMANDS, main


@pytest.mark.parametrize(
    "argv",
    [
        [],
        *([name] for name in COMMANDS),
        ["memory"],
        ["memory", "reindex"],
        ["mcp"],
        ["mcp", "list"],
    ],
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: parley")


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--help"], capture_output=True, text=True, check=True
    )
    for name in COMMANDS:
        assert name in result.stdout


def test_bad_configuration_exits_with_the_variable_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARLEY_HTTP_PORT", "eighty")
    assert main(["--env-file", "/dev/null", "doctor"]) == 2
    assert "PARLEY_HTTP_PORT" in capsys.readouterr().err
