"""What Parley knows about Claude models: which generation's API contract a model keeps, its
limits, its prices, and where it is in its life (current, legacy, deprecated, retired).

The current generation (`claude-sonnet-5-5`, `claude-haiku-5-5`) thinks always: a request
without `thinking` runs adaptive thinking, `thinking: disabled`, `budget_tokens`, sampling
settings, prefill and forced `tool_choice` are refused, thinking blocks go back unchanged and
are bound to the prefix before them. Its tokenizer counts about 30% more tokens for the same
text than 4.x did. Sources: Anthropic's "What's new in Sonnet 5.5", the Sonnet 5.5 and
Haiku 5.5 model pages and migration guides, "Preserved thinking".

A model Parley does not know is treated as the 4.x contract (nothing new is sent) unless its
id names a 5.x generation; an operator adds prices with `PARLEY_LLM_PRICES` without a release.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal

# "active": still served, with no notice Parley knows of; "current": the newest generation
Lifecycle = Literal["current", "active", "legacy", "deprecated", "retired"]


@dataclass(frozen=True, kw_only=True)
class Band:
    """Prices ($ per million tokens) for requests whose input is above `above` tokens."""

    above: int
    input: float
    output: float


@dataclass(frozen=True, kw_only=True)
class ClaudeModel:
    id: str
    name: str
    status: Lifecycle
    thinks_always: bool  # the current generation's contract (see the module docstring)
    context_window: int  # tokens
    max_output: int  # tokens
    input_price: float  # $ per million input tokens (cache reads 0.1x, writes 1.25x)
    output_price: float
    bands: tuple[Band, ...] = ()  # higher prices for long prompts
    replacement: str = ""  # the model to move to, for one that is not current
    retires: dt.date | None = None
    default_effort: str = ""  # the API's default effort, when the model has one
    token_factor: float = 1.0  # tokens for the same text, relative to 4.x

    def lifecycle(self, today: dt.date | None = None) -> Lifecycle:
        """The status on `today`: a model past its retirement date is retired."""
        today = today or dt.datetime.now(dt.UTC).date()
        if self.retires is not None and today >= self.retires:
            return "retired"
        return self.status


_SONNET_55 = "claude-sonnet-5-5"
_HAIKU_55 = "claude-haiku-5-5"

MODELS: dict[str, ClaudeModel] = {
    m.id: m
    for m in (
        ClaudeModel(
            id=_SONNET_55,
            name="Claude Sonnet 5.5",
            status="current",
            thinks_always=True,
            context_window=1_000_000,
            max_output=128_000,
            input_price=2.0,
            output_price=10.0,
            default_effort="high",
            token_factor=1.3,
        ),
        ClaudeModel(
            id=_HAIKU_55,
            name="Claude Haiku 5.5",
            status="current",
            thinks_always=True,
            context_window=1_000_000,
            max_output=128_000,
            input_price=0.10,
            output_price=0.50,
            bands=(Band(above=100_000, input=0.50, output=2.50),),  # 5x above 100K input
            default_effort="medium",
            token_factor=1.3,
        ),
        ClaudeModel(
            id="claude-sonnet-4-6",
            name="Claude Sonnet 4.6",
            status="legacy",
            thinks_always=False,
            context_window=200_000,
            max_output=64_000,
            input_price=3.0,
            output_price=15.0,
            replacement=_SONNET_55,
        ),
        ClaudeModel(
            id="claude-sonnet-4-5",
            name="Claude Sonnet 4.5",
            status="deprecated",
            thinks_always=False,
            context_window=200_000,
            max_output=64_000,
            input_price=3.0,
            output_price=15.0,
            replacement=_SONNET_55,
            retires=dt.date(2026, 11, 30),
        ),
        ClaudeModel(
            id="claude-haiku-4-5",
            name="Claude Haiku 4.5",
            status="active",
            thinks_always=False,
            context_window=200_000,
            max_output=64_000,
            input_price=1.0,
            output_price=5.0,
            replacement=_HAIKU_55,
        ),
        ClaudeModel(
            id="claude-opus-4-5",
            name="Claude Opus 4.5",
            status="active",
            thinks_always=False,
            context_window=200_000,
            max_output=64_000,
            input_price=5.0,
            output_price=25.0,
            replacement=_SONNET_55,
        ),
    )
}

# Ids of the 5.x generation and later that Parley has no entry for yet keep its contract.
_NEW_GENERATION = re.compile(r"^claude-[a-z]+-(\d+)(?:-\d+)?")
# A dated snapshot id (`claude-sonnet-4-5-20250929`) is its model.
_SNAPSHOT = re.compile(r"-\d{8}$")


def lookup(model_id: str) -> ClaudeModel | None:
    return MODELS.get(_SNAPSHOT.sub("", model_id))


def thinks_always(model_id: str) -> bool:
    """Whether the model keeps the current generation's contract (thinking always on)."""
    known = lookup(model_id)
    if known is not None:
        return known.thinks_always
    match = _NEW_GENERATION.match(model_id)
    return match is not None and int(match.group(1)) >= 5


def token_factor(model_id: str) -> float:
    """How many tokens the model counts for text 4.x counted as one."""
    known = lookup(model_id)
    if known is not None:
        return known.token_factor
    return 1.3 if thinks_always(model_id) else 1.0
