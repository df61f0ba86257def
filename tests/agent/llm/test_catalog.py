"""The model catalogue: which contract a model keeps, its prices (Haiku 5.5's band above
100K input tokens), and prices an operator adds without a release."""

from __future__ import annotations

import datetime as dt

import pytest

from agent.llm.catalog import lookup, thinks_always, token_factor
from agent.llm.usage import estimate_cost
from agent.messages import Usage


@pytest.mark.parametrize(
    ("model", "thinks"),
    [
        ("claude-sonnet-5-5", True),
        ("claude-haiku-5-5", True),
        ("claude-sonnet-4-6", False),
        ("claude-sonnet-4-5-20250929", False),  # a dated snapshot is its model
        ("claude-opus-6", True),  # a later generation Parley has no entry for yet
        ("claude-test", False),
        ("llama3", False),
    ],
)
def test_which_models_keep_the_current_contract(model: str, thinks: bool) -> None:
    assert thinks_always(model) is thinks


def test_the_new_tokenizer_counts_more_tokens() -> None:
    assert token_factor("claude-sonnet-5-5") == pytest.approx(1.3)
    assert token_factor("claude-sonnet-4-6") == 1.0


def test_current_prices_and_haiku_s_band_above_100k_input() -> None:
    """The Sonnet 5.5 and Haiku 5.5 model pages: $2/$10 and $0.10/$0.50 per Mtok, Haiku at
    5x above 100K input tokens (cached ones count towards the prompt's size)."""
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert estimate_cost({}, "claude-sonnet-5-5", million) == pytest.approx(12.0)
    small = Usage(input_tokens=90_000, output_tokens=1000)
    assert estimate_cost({}, "claude-haiku-5-5", small) == pytest.approx(
        (90_000 * 0.10 + 1000 * 0.50) / 1e6
    )
    large = Usage(input_tokens=20_000, cache_read_tokens=90_000, output_tokens=1000)
    billed_input = 20_000 + 0.1 * 90_000
    assert estimate_cost({}, "claude-haiku-5-5", large) == pytest.approx(
        (billed_input * 0.50 + 1000 * 2.50) / 1e6
    )
    # 4.x as before (Sonnet 4.5 still priced after its retirement: old usage keeps its cost)
    assert estimate_cost({}, "claude-sonnet-4-5", million) == pytest.approx(18.0)


def test_an_operator_adds_or_overrides_a_price_without_a_release() -> None:
    usage = Usage(input_tokens=1_000_000)
    assert estimate_cost({}, "claude-sonnet-6", usage) == 0.0
    assert estimate_cost({"claude-sonnet-6": (2.5, 12.0)}, "claude-sonnet-6", usage) == 2.5
    assert estimate_cost({"claude-sonnet-5-5": (1.0, 5.0)}, "claude-sonnet-5-5", usage) == 1.0


def test_lifecycle_follows_the_calendar() -> None:
    sonnet_45 = lookup("claude-sonnet-4-5")
    assert sonnet_45 is not None
    assert sonnet_45.lifecycle(dt.date(2026, 11, 29)) == "deprecated"
    assert sonnet_45.lifecycle(dt.date(2026, 11, 30)) == "retired"
    assert sonnet_45.replacement == "claude-sonnet-5-5"
    assert lookup("claude-sonnet-4-6").status == "legacy"  # type: ignore[union-attr]
    assert lookup("claude-sonnet-5-5").lifecycle() == "current"  # type: ignore[union-attr]
