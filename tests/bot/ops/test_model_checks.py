"""`parley doctor` on the hosted model: a Legacy, deprecated or retired model is named with
its replacement (against the fake Messages API with the real SDK)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.config import Settings
from bot.ops.service_checks import check_anthropic, model_lifecycle
from tests.fakes.anthropic import FakeAnthropic


@pytest.fixture
async def hosted() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


def settings_for(hosted: FakeAnthropic, model: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", hosted.url)
    monkeypatch.setenv("ANTHROPIC_MODEL", model)
    return Settings.load(env_file=None)


async def test_a_legacy_model_is_named_with_its_replacement(hosted, monkeypatch) -> None:
    check = await check_anthropic(settings_for(hosted, "claude-sonnet-4-6", monkeypatch))
    assert check.status == "warn"
    assert "Claude Sonnet 4.6 (claude-sonnet-4-6) is Legacy" in check.detail
    assert check.hint == "set ANTHROPIC_MODEL=claude-sonnet-5-5 (Claude Sonnet 5.5)"


async def test_a_current_model_passes(hosted, monkeypatch) -> None:
    check = await check_anthropic(settings_for(hosted, "claude-sonnet-5-5", monkeypatch))
    assert check.status == "ok" and "claude-sonnet-5-5" in check.detail


def test_a_deprecated_model_then_retired() -> None:
    before = model_lifecycle("claude-sonnet-4-5", dt.date(2026, 11, 28))
    assert before is not None and before.status == "warn"
    assert "is deprecated (retires on 2026-11-30)" in before.detail
    after = model_lifecycle("claude-sonnet-4-5", dt.date(2026, 12, 1))
    assert after is not None and after.status == "fail"
    assert "retired on 2026-11-30" in after.detail and "claude-sonnet-5-5" in after.hint
    assert model_lifecycle("claude-haiku-5-5") is None
    assert model_lifecycle("some-other-model") is None


def test_effort_display_side_model_and_ollama_think_are_settings(monkeypatch) -> None:
    monkeypatch.setenv("PARLEY_ANTHROPIC_EFFORT", "low")
    monkeypatch.setenv("PARLEY_ANTHROPIC_THINKING_DISPLAY", "omitted")
    monkeypatch.setenv("PARLEY_ANTHROPIC_SIDE_MODEL", "claude-haiku-5-5")
    monkeypatch.setenv("PARLEY_OLLAMA_THINK", "false")
    settings = Settings.load(env_file=None)
    assert settings.anthropic.effort == "low"
    assert settings.anthropic.thinking_display == "omitted"
    assert settings.anthropic.side_model == "claude-haiku-5-5"
    assert settings.ollama.think == "false"


def test_budgets_and_the_window_follow_the_new_tokenizer(monkeypatch) -> None:
    """The current generation counts about 30% more tokens for the same text: a run's token
    budget grows by that much, and the window Parley estimates at 4.x's rate shrinks so the
    real tokens stay within PARLEY_CONTEXT_TOKENS."""
    from bot.wiring.compose import agent_config

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("PARLEY_RUN_TOKEN_BUDGET", "100000")
    monkeypatch.setenv("PARLEY_CONTEXT_TOKENS", "26000")
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-sonnet-5-5")
    current = agent_config(Settings.load(env_file=None))
    assert (current.token_budget, current.context_tokens) == (130_000, 20_000)
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-sonnet-4-6")
    older = agent_config(Settings.load(env_file=None))
    assert (older.token_budget, older.context_tokens) == (100_000, 26_000)
