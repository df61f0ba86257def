"""A host program embeds the agent with nothing but the names `agent` exports."""

from __future__ import annotations

from agent import (
    Agent,
    AgentConfig,
    AwaitingApproval,
    ChatModel,
    Finished,
    RunContext,
    RunState,
    ScriptedModel,
    ToolRegistry,
    tool,
)


class Host:
    """A tiny program with its own tool, keeping a suspended run like a bot would."""

    def __init__(self, model: ChatModel) -> None:
        self.orders: list[str] = []
        self.tools = ToolRegistry()
        self.tools.register(tool(side_effects=True)(self.place_order))
        self.agent = Agent(model, self.tools, config=AgentConfig(max_steps=4, stream=False))
        self.saved: str | None = None  # the waiting run, as the host would store it

    async def place_order(self, item: str) -> str:
        """Order something.

        Args:
            item: What to order.
        """
        self.orders.append(item)
        return f"ordered {item}"

    async def ask(self, text: str, who: RunContext) -> str:
        outcome = await self.agent.run(text, who)
        if isinstance(outcome, AwaitingApproval):
            self.saved = outcome.state.model_dump_json()
            return "Approve? " + "; ".join(step.description for step in outcome.plan.steps)
        assert isinstance(outcome, Finished)
        return outcome.answer

    async def decide(self, approved: bool) -> str:
        assert self.saved is not None
        state = RunState.model_validate_json(self.saved)
        outcome = await self.agent.resume(state, approved=approved)
        assert isinstance(outcome, Finished)
        return outcome.answer


async def test_a_host_registers_a_tool_runs_and_resumes_an_approval() -> None:
    model = ScriptedModel(
        [
            ScriptedModel.turn(ScriptedModel.call("place_order", item="coffee beans")),
            ScriptedModel.reply("Your coffee beans are on their way."),
        ]
    )
    assert isinstance(model, ChatModel)
    host = Host(model)
    who = RunContext(conversation_id="shop:1", platform="shop", user_id="u1", chat_id="c1")

    prompt = await host.ask("Order coffee beans", who)
    assert prompt == "Approve? place order(item='coffee beans')"
    assert host.orders == []  # nothing happens before the approval

    assert await host.decide(approved=True) == "Your coffee beans are on their way."
    assert host.orders == ["coffee beans"]
    offered = [spec.name for spec in model.turn_requests[0].tools]
    assert offered == ["place_order"]
    result = model.turn_requests[1].messages[-1].tool_results[0]
    assert "ordered coffee beans" in result.content
