from __future__ import annotations

import os
import pty
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import COMMANDS, main

pytestmark = pytest.mark.process


@pytest.mark.parametrize(
    "argv",
    [
        [],
        *([name] for name in COMMANDS),
        ["memory"],
        ["memory", "reindex"],
        ["mcp"],
        ["mcp", "list"],
        ["connections"],
        ["connections", "rekey"],
        ["connections", "remove"],
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


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_a_malformed_json_setting_is_one_line_for_run_and_doctor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    monkeypatch.setenv("PARLEY_LLM_PRICES", "{bad")
    assert main(["--env-file", "/dev/null", command]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("parley: invalid configuration: PARLEY_LLM_PRICES: not valid")


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_a_redis_url_without_a_scheme_is_one_line_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    monkeypatch.setenv("REDIS_URL", "localhost:6379")
    assert main(["--env-file", "/dev/null", command]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "parley: invalid configuration: REDIS_URL: needs a scheme, e.g. "
        "redis://localhost:6379/0 (got 'localhost:6379')\n"
    )


def test_make_run_with_a_malformed_json_setting_prints_one_line_of_parley(
    tmp_path: Path,
) -> None:
    """What a newcomer sees from `make run`: parley's one line (and make's own), no trace."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PARLEY_", "MAKE"))}
    result = subprocess.run(
        ["make", "-s", "-C", str(root), "run"],
        env={**env, "PARLEY_LLM_PRICES": "{bad", "PARLEY_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode != 0
    said = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    assert said == [
        "parley: invalid configuration: PARLEY_LLM_PRICES: not valid JSON (Expecting property "
        'name enclosed in double quotes: line 1 column 2 (char 1)); for example {"claude-sonnet-'
        '4-6": [3.0, 15.0]}'
    ], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_make_run_with_no_model_says_what_to_set_and_ends_without_a_make_error(
    tmp_path: Path,
) -> None:
    """`make run` in a terminal, with no platform and no model: the console says what to set
    (and how to try the demo), and make adds no error of its own."""
    root = Path(__file__).resolve().parents[2]
    ours = ("PARLEY_", "MAKE", "ANTHROPIC_", "OLLAMA_", "SLACK_", "TELEGRAM_", "REDIS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    env |= {"OLLAMA_HOST": "http://127.0.0.1:9", "PARLEY_DATA_DIR": str(tmp_path)}
    controller, terminal = pty.openpty()  # `parley run` opens the console only on a terminal
    with subprocess.Popen(
        ["make", "-s", "-C", str(root), "run"],
        env=env,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    ) as make:
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal closed: make and parley have ended
                break
            if not chunk:
                break
            shown += chunk
        code = make.wait(timeout=300)
    os.close(controller)
    out = shown.decode()
    assert code == 0, out
    assert "Parley has no language model to talk to" in out
    assert "set ANTHROPIC_API_KEY" in out and "console --demo` answers" in out
    assert "make: ***" not in out and "Traceback" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert re.fullmatch(r"parley \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


def test_env_file_may_follow_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = tmp_path / "custom.env"
    env.write_text("PARLEY_HTTP_PORT=eighty\n")
    assert main(["doctor", "--env-file", str(env)]) == 2
    assert "PARLEY_HTTP_PORT" in capsys.readouterr().err


def test_a_missing_env_file_named_on_the_command_line_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--env-file", str(tmp_path / "nope.env"), "doctor"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.env does not exist" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"PARLEY_LOG_LEVEL=INFO\nthis is not a setting\n", "line 2: cannot read it"),
        (b'A=1\nB="unterminated\n', "line 2"),
        (b"\xff\xfe\x00garbage\n", "cannot be read as UTF-8"),
        # nothing redacts yet when the settings file is read: the line itself is never shown
        (b"A=1\nSLACK_BOT_TOKEN xoxb-1111-2222-leakedtoken\n", "line 2: cannot read it"),
        (b'A=1\nSLACK_BOT_TOKEN="xoxb-1111-2222-leaked\n', "cannot read the line for SLACK_BOT"),
    ],
)
def test_a_malformed_env_file_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    env = tmp_path / ".env"
    env.write_bytes(content)
    assert main(["--env-file", str(env), "doctor"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and expected in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert "leaked" not in captured.err


def test_a_missing_skills_dir_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARLEY_SKILLS_DIR", str(tmp_path / "no-such-skills"))
    assert main(["--env-file", "/dev/null", "doctor"]) == 2
    err = capsys.readouterr().err
    assert "PARLEY_SKILLS_DIR" in err and "Traceback" not in err


@pytest.mark.parametrize("setting", ["PARLEY_HTTP_PORT", "PARLEY_METRICS_PORT"])
def test_a_busy_port_is_one_clear_line_and_doctor_says_so(redis_url: str, setting: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "PARLEY_HTTP_HOST": "127.0.0.1",
            "PARLEY_HTTP_PORT": "0",
            "PARLEY_METRICS_PORT": "0",
            setting: str(port),
            "OLLAMA_HOST": "http://127.0.0.1:1",
            # Slack over HTTP, so the gateway opens its public webhook listener.
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "secret",
            "SLACK_API_URL": "http://127.0.0.1:1/api/",
        }
        run = [sys.executable, "-m", "bot.cli", "--env-file", "/dev/null"]
        started = subprocess.run(
            [*run, "gateway"], env=env, capture_output=True, text=True, timeout=60
        )
        assert started.returncode == 2, started.stderr
        last = started.stderr.strip().splitlines()[-1]
        assert last == (
            f"parley: 127.0.0.1:{port} is already in use; stop whatever listens there "
            f"or set {setting} to a free port"
        )
        assert "Traceback" not in started.stderr
        doctor = subprocess.run(
            [*run, "doctor"], env=env, capture_output=True, text=True, timeout=60
        )
        assert doctor.returncode == 1
        assert f"fail            http       127.0.0.1:{port} is already in use" in doctor.stdout
        assert f"set {setting}" in doctor.stdout


def test_schedules_lists_every_schedule_for_an_operator(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    import redis.asyncio as aioredis

    from agent.protocols import RunContext
    from bot.features.schedules.store import ScheduleStore
    from bot.runtime.keys import Keys

    async def make() -> str:
        client = aioredis.Redis.from_url(redis_url)
        context = RunContext(
            conversation_id="slack:T1:C1:-", platform="slack", user_id="U1", chat_id="C1"
        )
        made = await ScheduleStore(client, Keys()).create_schedule(
            "0 9 * * 1-5", "summarise #support", "Europe/Berlin", (), context
        )
        await client.aclose()
        return made.id

    schedule_id = asyncio.run(make())
    env = tmp_path / "ops.env"
    env.write_text(f"REDIS_URL={redis_url}\n")
    assert main(["--env-file", str(env), "schedules"]) == 0
    out = capsys.readouterr().out
    [line] = [row for row in out.splitlines() if row.startswith(schedule_id)]
    assert "active" in line and "slack:T1:C1:-" in line and "summarise #support" in line
    assert "0 9 * * 1-5 [Europe/Berlin]" in line


@pytest.mark.parametrize(
    ("trigger", "more_env", "said"),
    [
        pytest.param(
            '{"ci": {"secret": "short", "conversation": "telegram:1", "objective": "x"}}',
            "",
            ("PARLEY_TRIGGERS_CONFIG", "'ci'", "16 characters"),
            id="a file that cannot be used",
        ),
        # Before: 202 "started" for every delivery, each dropped later with one ERROR line.
        pytest.param(
            '{"ci": {"secret": "s3cret-s3cret-s3cret", "conversation": "slack:T1/C2", '
            '"objective": "x"}}',
            "SLACK_BOT_TOKEN=\nTELEGRAM_BOT_TOKEN=\n",
            ("trigger 'ci' posts to slack:T1/C2, but Slack is not configured",),
            id="a trigger that could never be delivered",
        ),
    ],
)
def test_a_trigger_the_service_cannot_serve_stops_it_naming_why(
    trigger: str,
    more_env: str,
    said: tuple[str, ...],
    tmp_path: Path,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    triggers = tmp_path / "triggers.json"
    triggers.write_text(trigger)
    env = tmp_path / "gateway.env"
    env.write_text(
        f"REDIS_URL={redis_url}\nPARLEY_TRIGGERS_CONFIG={triggers}\nPARLEY_HTTP_PORT=0\n"
        "PARLEY_METRICS_PORT=0\n" + more_env
    )
    assert main(["--env-file", str(env), "gateway"]) == 2
    err = capsys.readouterr().err
    assert all(words in err for words in said), err


def test_connections_rekey_and_remove(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio
    import json

    import redis.asyncio as aioredis
    from cryptography.fernet import Fernet

    from agent.mcp import ServerConfig
    from bot.features.connections import oauth
    from bot.features.connections.store import Connections
    from bot.runtime.keys import Keys

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    server = ServerConfig(url="http://127.0.0.1:1/mcp", auth="user")
    mcp = tmp_path / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"tracker": server.model_dump(exclude_none=True)}}))
    env = tmp_path / ".env"
    settings = (
        f"REDIS_URL={redis_url}\nPARLEY_MCP_CONFIG={mcp}\nPARLEY_PUBLIC_URL=https://p.example\n"
    )

    async def with_key(key: str, work: object) -> object:
        redis = aioredis.Redis.from_url(redis_url)
        c = Connections(
            redis,
            Keys(),
            servers={"tracker": server},
            secret_key=key,
            public_url="https://p.example",
            connect_ttl=60,
        )
        try:
            return await work(c)  # type: ignore[operator]
        finally:
            await redis.aclose()

    tokens = oauth.Tokens(access_token="at-1", refresh_token="rt-1")
    asyncio.run(with_key(old, lambda c: c.store("tracker", "telegram", "42", tokens)))
    env.write_text(settings + f"PARLEY_SECRET_KEY={new},{old}\n")
    assert main(["--env-file", str(env), "connections", "rekey"]) == 0
    assert "re-encrypted 1 records" in capsys.readouterr().out
    opened = asyncio.run(with_key(new, lambda c: c._tokens("tracker", "telegram", "42")))
    assert opened == tokens  # the new key alone opens it now
    env.write_text(settings + f"PARLEY_SECRET_KEY={new}\n")
    assert main(["--env-file", str(env), "connections", "remove", "telegram", "42"]) == 0
    assert "revoked and removed: tracker" in capsys.readouterr().out
    assert asyncio.run(with_key(new, lambda c: c.connected("telegram", "42"))) == []
