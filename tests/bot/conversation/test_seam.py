"""The seam features plug into the executor with: each feature effect is carried out by the
feature that brought it, and the executor itself names none of them."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_args

import pytest
import redis.asyncio as aioredis

from bot.conversation import effects as fx
from bot.conversation.seam import Acting, registry
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import running

ROOT = Path(__file__).resolve().parents[3]


class Lists:
    def handlers(self) -> dict[type, Any]:
        return {fx.ListSchedules: self.handle}

    async def handle(self, acting: Acting, effect: fx.ListSchedules) -> None:
        return None


def test_two_features_may_not_claim_one_effect() -> None:
    assert list(registry([Lists()])) == [fx.ListSchedules]
    with pytest.raises(ValueError, match="two features carry out ListSchedules"):
        registry([Lists(), Lists()])


def test_the_executor_names_no_feature_effect_and_no_feature() -> None:
    """A feature costs the executor no field, import or match case."""
    source = (ROOT / "bot/conversation/executor.py").read_text()
    named = {node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)}
    brought = {kind.__name__ for kind in get_args(fx.FeatureEffect)}
    assert not named & brought
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not {m for m in imported if m.startswith("bot.features")}


async def test_the_service_wires_a_feature_for_every_feature_effect(
    redis: aioredis.Redis,
) -> None:
    async with running(redis, ScriptedModel([])) as harness:
        handled = set(harness.runtime.executor._handlers)
    # followed MCP tasks are wired only where an MCP server runs tasks
    assert handled == set(get_args(fx.FeatureEffect)) - {fx.CancelTasks}
