"""Tools receive the host's own objects by type; those parameters are not in the schema."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from agent import (
    Agent,
    AgentConfig,
    Dep,
    Finished,
    MissingDependency,
    RunContext,
    ScriptedModel,
    ToolContext,
    ToolRegistry,
    tool,
)
from agent.testing import call, reply, turn


@dataclass
class Shop:
    stock: dict[str, int] = field(default_factory=lambda: {"tea": 3})


@dataclass
class Clock:
    now: str = "09:00"


@tool
async def stock_of(shop: Dep[Shop], ctx: ToolContext, item: str) -> str:
    """How many of an item are in stock.

    Args:
        item: What to look up.
    """
    return f"{shop.stock.get(item, 0)} {item} for {ctx.run.user_id} ({id(shop)})"


@tool
async def opening(clock: Dep[Clock]) -> str:
    """Whether the shop is open."""
    return f"open at {clock.now}"


def test_a_dependency_is_not_part_of_the_schema() -> None:
    schema = stock_of.spec().input_schema
    assert set(schema["properties"]) == {"item"} and schema["required"] == ["item"]
    assert stock_of.deps == {"shop": Shop}
    assert opening.spec().input_schema["properties"] == {}


async def test_tools_receive_what_the_registry_and_the_agent_provide(ctx: RunContext) -> None:
    shop, clock = Shop(), Clock()
    tools = ToolRegistry([stock_of, opening])
    tools.provide(Shop, shop)
    model = ScriptedModel([turn(call("stock_of", item="tea"), call("opening")), reply("3 tea.")])
    agent = Agent(model, tools, deps={Clock: clock}, config=AgentConfig(stream=False))
    outcome = await agent.run("Any tea?", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "3 tea."
    results = [r.content for r in model.requests[1].messages[-1].tool_results]
    assert f"3 tea for 42 ({id(shop)})" in results[0]
    assert "open at 09:00" in results[1]


async def test_a_missing_dependency_stops_the_run_before_it_starts(ctx: RunContext) -> None:
    tools = ToolRegistry([stock_of, opening])
    tools.provide(Shop, Shop())
    model = ScriptedModel([reply("never")])
    agent = Agent(model, tools)
    with pytest.raises(MissingDependency, match="'opening' needs a Clock") as caught:
        await agent.run("Open?", ctx)
    assert caught.value.kind is Clock and caught.value.tool == "opening"
    assert model.requests == []  # not a single model call
    tools.provide(Clock, Clock(now="10:00"))  # provided later: the next run has it
    assert isinstance(await agent.run("Open?", ctx), Finished)


async def test_a_tool_called_without_its_dependency_says_which(ctx: RunContext) -> None:
    with pytest.raises(MissingDependency, match="ToolRegistry.provide"):
        await opening({}, ToolContext(run=ctx))
