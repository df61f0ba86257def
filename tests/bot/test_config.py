from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.config import ConfigError, Settings, all_variables

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_load_without_any_environment() -> None:
    settings = Settings.load(env_file=None)
    assert settings.redis.url is None
    assert settings.ollama.host == "http://127.0.0.1:11434"
    assert settings.telegram.mode == "polling"
    assert settings.http.port == 8080


def test_reads_ecosystem_names_and_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-abc")
    monkeypatch.setenv("PARLEY_TELEGRAM_ALLOWED_USERS", "42, @alice ,")
    monkeypatch.setenv("PARLEY_LLM_TIMEOUT", "2.5")
    monkeypatch.setenv("PARLEY_LLM_PRICES", '{"m": [1, 2]}')
    settings = Settings.load(env_file=None)
    assert settings.slack.bot_token is not None
    assert settings.slack.bot_token.get_secret_value() == "xoxb-abc"
    assert settings.telegram.allowed_users == ["42", "@alice"]
    assert settings.llm.timeout == 2.5
    assert settings.llm.prices == {"m": (1.0, 2.0)}


def test_env_file_is_read_and_empty_values_mean_unset(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("REDIS_URL=\nANTHROPIC_API_KEY=sk-test\nPARLEY_HTTP_PORT=9000\n")
    settings = Settings.load(env_file=env)
    assert settings.redis.url is None
    assert settings.anthropic.api_key is not None
    assert settings.http.port == 9000


def test_invalid_values_name_every_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_LLM_TIMEOUT", "soon")
    monkeypatch.setenv("PARLEY_TELEGRAM_MODE", "pigeon")
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=None)
    message = str(caught.value)
    assert "PARLEY_LLM_TIMEOUT" in message and "'soon'" in message
    assert "PARLEY_TELEGRAM_MODE" in message


@pytest.mark.parametrize("where", ["environment", ".env"])
@pytest.mark.parametrize("value", ["{bad", "[1, 2", "not json"])
def test_a_malformed_json_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str, value: str
) -> None:
    env = tmp_path / ".env"
    env.write_text(f"PARLEY_LLM_PRICES={value}\n" if where == ".env" else "")
    if where == "environment":
        monkeypatch.setenv("PARLEY_LLM_PRICES", value)
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=env)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(
        "invalid configuration: PARLEY_LLM_PRICES: not valid JSON ("
    )
    assert message.endswith('for example {"claude-sonnet-4-6": [3.0, 15.0]}')


def test_json_where_a_file_is_named_says_the_setting_wants_a_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARLEY_MCP_CONFIG", '{"mcpServers": {}}')
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=None)
    assert str(caught.value) == (
        "invalid configuration: PARLEY_MCP_CONFIG: names a JSON file; put the JSON in a file "
        """and set its path (got '{"mcpServers": {}}')"""
    )
    monkeypatch.delenv("PARLEY_MCP_CONFIG")
    monkeypatch.setenv("PARLEY_TRIGGERS_CONFIG", "{bad")
    with pytest.raises(ConfigError, match="PARLEY_TRIGGERS_CONFIG: names a JSON file"):
        Settings.load(env_file=None)


def test_several_bad_variables_are_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_LLM_PRICES", "{bad")
    monkeypatch.setenv("PARLEY_HTTP_PORT", "eighty")
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=None)
    lines = str(caught.value).split("\n")
    assert lines[0] == "invalid configuration:" and len(lines) == 3
    assert lines[1].startswith("  PARLEY_LLM_PRICES: not valid JSON")
    assert lines[2].startswith("  PARLEY_HTTP_PORT: Input should be a valid integer")


def test_env_example_lists_every_variable_and_nothing_else() -> None:
    example = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", example, flags=re.MULTILINE))
    assert listed == set(all_variables())


def test_design_contract_variables_exist() -> None:
    names = set(all_variables())
    for name in [
        "REDIS_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "OLLAMA_HOST",
        "OLLAMA_MODEL",
        "PARLEY_LLM_TIMEOUT",
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_API_URL",
        "PARLEY_TELEGRAM_MODE",
        "PARLEY_TELEGRAM_WEBHOOK_URL",
        "PARLEY_TELEGRAM_WEBHOOK_SECRET",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "SLACK_API_URL",
        "PARLEY_HTTP_HOST",
        "PARLEY_HTTP_PORT",
        "PARLEY_METRICS_PORT",
        "PARLEY_TELEGRAM_ALLOWED_USERS",
        "PARLEY_SLACK_ALLOWED_TEAMS",
        "PARLEY_SLACK_ALLOWED_CHANNELS",
        "PARLEY_APPROVERS",
        "PARLEY_DATA_DIR",
    ]:
        assert name in names, name


def test_the_first_show_of_a_streamed_answer_stays_under_a_second() -> None:
    # the design promises that any answer taking more than a second to write streams
    assert Settings.load(env_file=None).streaming.first_show == 0.5
    held = Settings.load(env_file=None, streaming={"PARLEY_STREAM_FIRST_SHOW": 0.9})
    assert held.streaming.first_show == 0.9
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=None, streaming={"PARLEY_STREAM_FIRST_SHOW": 1})
    assert "PARLEY_STREAM_FIRST_SHOW" in str(caught.value)


def test_the_shipped_memory_settings_are_the_memory_defaults() -> None:
    """The recall-quality tests score `MemoryConfig()`; what ships is the settings' defaults."""
    from bot.wiring.memory_setup import memory_config
    from memory import MemoryConfig
    from memory.config import MINILM

    assert memory_config(Settings.load(env_file=None), MINILM) == MemoryConfig()


@pytest.mark.parametrize(
    ("variable", "value", "fix"),
    [
        ("REDIS_URL", "localhost:6379", "needs a scheme, e.g. redis://localhost:6379/0"),
        (
            "REDIS_URL",
            "http://localhost:6379",
            "must start with redis://, rediss:// or unix://, e.g. redis://localhost:6379/0",
        ),
        (
            "ANTHROPIC_BASE_URL",
            "api.anthropic.com",
            "needs a scheme, e.g. https://api.anthropic.com",
        ),
        ("TELEGRAM_API_URL", "api.telegram.org", "needs a scheme, e.g. https://api.telegram.org"),
        ("SLACK_API_URL", "slack.com/api/", "needs a scheme, e.g. https://slack.com/api/"),
        ("PARLEY_TRANSCRIBE_URL", "whisper:8000", "needs a scheme, e.g. https://api.openai.com"),
        (
            "PARLEY_PUBLIC_URL",
            "parley.example.com",
            "needs a scheme, e.g. https://parley.example.com",
        ),
        (
            "PARLEY_TELEGRAM_WEBHOOK_URL",
            "bot.example.com/telegram/webhook",
            "needs a scheme, e.g. https://parley.example.com/telegram/webhook",
        ),
    ],
)
def test_a_url_setting_without_its_scheme_is_one_line_naming_it_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, fix: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=None)
    assert str(caught.value) == f"invalid configuration: {variable}: {fix} (got {value!r})"


def test_a_redis_url_with_a_password_is_refused_without_showing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "http://:hunter2@redis:6379")
    with pytest.raises(ConfigError) as caught:
        Settings.load(env_file=None)
    assert "REDIS_URL: must start with redis://" in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "value", ["redis://localhost:6379/0", "rediss://h:6380", "unix:///tmp/redis.sock"]
)
def test_redis_urls_with_a_scheme_load(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("REDIS_URL", value)
    assert Settings.load(env_file=None).redis.url == value


def test_every_url_setting_names_a_missing_scheme() -> None:
    """A URL setting added later gets the same one line: `NAME: needs a scheme, e.g. …`."""
    urls = [name for name in all_variables() if name.endswith("_URL")]
    assert {"REDIS_URL", "ANTHROPIC_BASE_URL", "PARLEY_PUBLIC_URL"} <= set(urls)
    for name in urls:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(name, "host.example:8080")
            with pytest.raises(ConfigError) as caught:
                Settings.load(env_file=None)
        assert str(caught.value).startswith(
            f"invalid configuration: {name}: needs a scheme, e.g. "
        ), str(caught.value)
