"""Attachments in the loop: before the objective in the user's turn, images only for their run."""

from __future__ import annotations

from agent import Agent, AgentConfig, AwaitingAnswer, Finished, builtin_registry
from agent.context import estimate_message
from agent.messages import ImageBlock, Message, TextBlock
from agent.protocols import RunContext
from agent.state import RunState
from agent.testing import ScriptedModel, call, reply, turn

IMAGE = ImageBlock(media_type="image/png", data="aGVsbG8=", width=800, height=600, name="a.png")


async def test_attachments_precede_the_objective_and_survive_suspension(ctx: RunContext) -> None:
    model = ScriptedModel(
        [turn(call("ask_user", question="Which part?", options=[])), reply("The left.")]
    )
    agent = Agent(model, builtin_registry(), config=AgentConfig())
    thread = TextBlock(text="<thread>Bob: the chart is wrong</thread>")
    outcome = await agent.run("what is wrong here?", ctx, attachments=[thread, IMAGE])
    assert isinstance(outcome, AwaitingAnswer)
    first = model.requests[0].messages[0]
    assert first.content == [thread, IMAGE, TextBlock(text="what is wrong here?")]

    stored = RunState.model_validate_json(outcome.state.model_dump_json())  # as in Redis
    finished = await agent.resume(stored, answer="the legend")
    assert isinstance(finished, Finished)
    assert model.requests[1].messages[0].images == [IMAGE]


async def test_a_finished_run_keeps_no_image(ctx: RunContext) -> None:
    model = ScriptedModel([reply("A chart."), reply("Yes.")])
    agent = Agent(model, builtin_registry(), config=AgentConfig())
    first = await agent.run("what is this?", ctx, attachments=[IMAGE])
    assert model.requests[0].messages[0].images == [IMAGE]
    assert first.state.messages[0].images == []  # what the bot stores holds no image bytes
    assert IMAGE.data not in first.state.model_dump_json()
    await agent.run("thanks, is it recent?", ctx, history=first.state)
    earlier = model.requests[1].messages[0]
    assert earlier.images == []
    assert "a.png" in earlier.text and "no longer available" in earlier.text


def test_an_image_counts_by_its_size_in_the_context_estimate() -> None:
    text_only = estimate_message(Message.user("hi"))
    with_image = estimate_message(Message(role="user", content=[IMAGE, TextBlock(text="hi")]))
    assert with_image - text_only == 800 * 600 // 750 + 1


async def test_a_cancelled_or_expired_question_lets_go_of_its_image(ctx: RunContext) -> None:
    model = ScriptedModel([turn(call("ask_user", question="Which part?", options=[]))])
    outcome = await Agent(model, builtin_registry()).run("look", ctx, attachments=[IMAGE])
    assert isinstance(outcome, AwaitingAnswer) and outcome.state.messages[0].images == [IMAGE]
    outcome.state.abandon("Not run: the user cancelled.")
    assert IMAGE.data not in outcome.state.model_dump_json()
