"""Parley on the current Claude generation: the real anthropic SDK against the fake Messages
API in strict mode (`tests/fakes/anthropic_strict.py`), which refuses, as the real API does,
every request shape the current models refuse. Every request Parley builds here must be
accepted (`hosted.refusals` stays empty), across multi-step tool runs, recalled memories that
change every step, a suspended run stored in Redis and resumed by another worker, streaming,
compaction, and the fallback to Ollama in the middle of a run and back.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from agent.builtin_tools import builtin_registry
from agent.llm.anthropic import AnthropicModel
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.loop import Agent, AgentConfig
from agent.messages import ChatRequest, Message, ThinkingBlock
from agent.outcomes import AwaitingApproval, Finished
from agent.protocols import MemoryRecord, ProgressEvent, RunContext
from agent.state import RunState
from agent.tools import ToolRegistry, tool
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic, tool_results

SONNET = "claude-sonnet-5-5"
CONTEXT = RunContext(conversation_id="c", platform="console", user_id="u", chat_id="c")
sent: list[str] = []


@tool
async def lookup(city: str) -> str:
    """Look up facts about a city."""
    return f"{city} has 2 million people"


@tool(side_effects=True, describe=lambda a: f"Email {a['to']}")
async def send_email(to: str) -> str:
    """Send an e-mail."""
    sent.append(to)
    return f"sent to {to}"


def tools() -> ToolRegistry:
    registry = builtin_registry()
    registry.register(lookup)
    registry.register(send_email)
    return registry


class ChangingRecall:
    """Recall whose memories differ every step (they follow the latest observation), as
    Parley's recall does before each think step."""

    def __init__(self) -> None:
        self.serial = itertools.count(1)

    async def recall(self, query: str, context: RunContext, k: int | None = None):  # type: ignore[no-untyped-def]
        now = time.time()
        number = next(self.serial)
        return [
            MemoryRecord(
                id=f"m{number}",
                text=f"memory {number} about: {query[-40:]}",
                kind="fact",
                scope="user:console:u",
                author="u",
                source_conversation="c",
                created_at=now,
                last_used_at=now,
            )
        ]


@pytest.fixture
async def made() -> AsyncIterator[list[object]]:
    models: list[object] = []
    yield models
    for model in models:
        await model.close()  # type: ignore[attr-defined]


def claude(hosted: FakeAnthropic, made: list[object], model: str = SONNET) -> AnthropicModel:
    built = AnthropicModel(api_key="sk-ant-test", model=model, base_url=hosted.url)
    made.append(built)
    return built


def agent(model: object, **kwargs: object) -> Agent:
    return Agent(model, tools(), recall=ChangingRecall(), **kwargs)  # type: ignore[arg-type]


def accepted(hosted: FakeAnthropic) -> None:
    assert hosted.refusals == [], hosted.refusals


@pytest.mark.parametrize("model", [SONNET, "claude-haiku-5-5"])
async def test_a_multi_step_tool_run_with_memories_recalled_every_step(
    hosted, made, model: str
) -> None:
    hosted.script(
        fa.tool("lookup", thought="Looking up Lyon first.", city="Lyon"),
        fa.tool("lookup", thought="Now Paris.", city="Paris"),
        fa.text("Paris is bigger."),
    )
    outcome = await agent(claude(hosted, made, model)).run("Which is bigger?", CONTEXT)
    accepted(hosted)
    assert isinstance(outcome, Finished) and outcome.answer == "Paris is bigger."
    first, second, third = (call.body for call in hosted.message_calls)
    assert "output_config" not in first or first["output_config"]["effort"]
    assert not {"temperature", "top_p", "top_k", "tool_choice"} & set(first)
    # the first step's turn goes back exactly as it came, signature and all …
    answered = second["messages"][1]["content"]
    assert answered[0]["type"] == "thinking" and answered[0]["signature"]
    assert answered[0] == {k: v for k, v in third["messages"][1]["content"][0].items()}
    # … after the user turn exactly as it was then, its memories included
    assert _plain(second["messages"][0]) == _plain(first["messages"][0])
    assert _plain(third["messages"][:3]) == _plain(second["messages"][:3])
    assert "memory 1" in str(first["messages"][0]) and "memory 2" in str(second["messages"][2])
    # the answer kept for the next run has its thinking; the user sees only the text
    kept = outcome.state.messages[-1]
    assert kept.thinking and kept.text == "Paris is bigger."


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def test_the_next_run_in_the_conversation_keeps_the_prefix(hosted, made) -> None:
    """A second objective in the same conversation: the whole earlier run goes back
    unchanged, so its thinking stays valid."""
    hosted.script(fa.tool("lookup", city="Lyon"), fa.text("About 2 million."))
    model = claude(hosted, made)
    first = await agent(model).run("How big is Lyon?", CONTEXT)
    hosted.script(fa.tool("lookup", city="Nice"), fa.text("Also 2 million."))
    second = await agent(model).run("And Nice?", CONTEXT, history=first.state)
    accepted(hosted)
    assert isinstance(second, Finished) and second.answer == "Also 2 million."
    assert not hosted.strict.dropped


async def test_an_approval_suspends_the_run_in_redis_and_another_worker_resumes_it(
    hosted, made, redis: aioredis.Redis
) -> None:
    sent.clear()
    hosted.script(
        fa.tool("send_email", thought="Drafting it.", to="ann@example.com"),
        fa.text("Sent."),
    )
    outcome = await agent(claude(hosted, made)).run("Email Ann", CONTEXT)
    assert isinstance(outcome, AwaitingApproval) and sent == []
    await redis.set("parley:test:run", outcome.state.model_dump_json())
    # a restart: another process, another client, the state read back from Redis
    stored = RunState.model_validate_json(await redis.get("parley:test:run"))
    assert stored.messages[-1].thinking == outcome.state.messages[-1].thinking
    done = await agent(claude(hosted, made)).resume(stored, approved=True)
    accepted(hosted)
    assert isinstance(done, Finished) and done.answer == "Sent." and sent == ["ann@example.com"]
    resumed = hosted.message_calls[-1].body
    assert resumed["messages"][1]["content"][0]["type"] == "thinking"
    assert "sent to ann@example.com" in tool_results(resumed)[0]["content"]


async def test_streamed_steps_show_progress_notes_as_status_never_as_the_answer(
    hosted, made
) -> None:
    events: list[ProgressEvent] = []

    async def watch(event: ProgressEvent) -> None:
        events.append(event)

    hosted.script(
        fa.tool("lookup", thought="Checking the population of Lyon.", city="Lyon"),
        fa.streamed("Lyon has about 2 million people.", chunk=6),
    )
    outcome = await agent(claude(hosted, made), on_progress=watch).run("Lyon?", CONTEXT)
    accepted(hosted)
    assert isinstance(outcome, Finished) and outcome.answer == "Lyon has about 2 million people."
    texts = "".join(e.detail.get("text", "") for e in events if e.kind == "text_delta")
    assert texts == "Lyon has about 2 million people."  # the thinking never streams as text
    statuses = [e.detail.get("status") for e in events if e.kind == "text_reset"]
    assert "Checking the population of Lyon." in statuses
    assert hosted.message_calls[0].body["thinking"]["display"] == "summarized"


async def test_compaction_drops_only_thinking_whose_prefix_changed(hosted, made) -> None:
    """A small window folds early turns into the summary: a kept turn written before the
    fold goes out without its thinking (its prefix changed; never refused), and the turns
    written after it keep theirs."""
    steps = itertools.count()

    def respond(body: dict) -> fa.Item:  # type: ignore[type-arg]
        if "<transcript>" in str(body.get("messages")):
            return fa.text("A summary of earlier turns.")
        return fa.tool("lookup", city="X" * 600) if next(steps) < 6 else fa.text("Done.")

    hosted.responder = respond
    config = AgentConfig(context_tokens=3500, max_steps=10)
    outcome = await agent(claude(hosted, made), config=config).run("Look up a lot", CONTEXT)
    accepted(hosted)
    assert isinstance(outcome, Finished) and outcome.answer == "Done."
    assert outcome.state.summary == "A summary of earlier turns."
    # How many folds the run makes depends on the size of the tool list; every request after
    # a fold must show the kept turns from before it as text and the later ones as they came.
    requests = [c.body["messages"] for c in hosted.message_calls]
    turns = [
        [[b["type"] for b in m["content"]] for m in messages if m["role"] == "assistant"]
        for messages in requests
        if "<transcript>" not in str(messages)
    ]
    folded = [kinds for kinds in turns if ["text"] in kinds]
    assert any(["thinking", "tool_use"] in kinds for kinds in folded), turns
    for kinds in folded:
        before = (
            kinds.index(["thinking", "tool_use"])
            if ["thinking", "tool_use"] in kinds
            else len(kinds)
        )
        assert kinds[:before] == [["text"]] * before, kinds  # written before the fold
        assert all(k == ["thinking", "tool_use"] for k in kinds[before:]), kinds  # as they came


@pytest.fixture
async def fallback_model(redis, hosted, local, made) -> FallbackModel:
    model = FallbackModel(
        claude(hosted, made),
        OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096),
        redis_breaker(redis, "parley:breaker:anthropic", "anthropic", BreakerPolicy(failures=3)),
        timeout=5.0,
    )
    made.append(model)
    return model


async def test_fallback_to_ollama_mid_run_and_back_to_claude(hosted, local, fallback_model) -> None:
    """Step 1 Claude, step 2 a 529 answered by Ollama's tool call, step 3 Claude again: the
    Ollama-written turn has no thinking block, and goes to Claude as text."""
    hosted.script(fa.tool("lookup", city="Lyon"), fa.error(529), fa.text("Both are big."))
    local.script(fo.call("lookup", city="Paris"))
    outcome = await agent(fallback_model).run("Lyon and Paris?", CONTEXT)
    accepted(hosted)
    assert isinstance(outcome, Finished) and outcome.answer == "Both are big."
    last = hosted.message_calls[-1].body["messages"]
    assert last[1]["content"][0]["type"] == "thinking"  # Claude's own turn, as it came
    assert last[3]["role"] == "assistant" and "[I called lookup(" in last[3]["content"][0]["text"]
    assert "Paris has 2 million people" in str(last[4]["content"])
    assert all(block["type"] != "tool_result" for block in last[4]["content"])


async def test_the_fallback_continuing_a_cut_answer_then_claude_again(
    hosted, local, fallback_model
) -> None:
    """A hosted stream that breaks after its text was shown is finished by Ollama; the next
    objective goes to Claude with that joined answer in the history."""
    hosted.script(fa.broken("Half of the"))
    local.script(fo.reply("answer."))
    first = await agent(fallback_model, on_progress=_ignore).run("Tell me", CONTEXT)
    hosted.script(fa.text("Next answer."))
    second = await agent(fallback_model).run("And more", CONTEXT, history=first.state)
    accepted(hosted)
    assert isinstance(second, Finished) and second.answer == "Next answer."


async def _ignore(event: ProgressEvent) -> None:
    return None


async def test_a_4x_model_gets_the_request_it_always_got(hosted, made) -> None:
    """`claude-sonnet-4-6`: no thinking, no effort, no changed shape; thinking blocks that a
    current model wrote earlier in the conversation are not sent to it."""
    history = [
        Message.user("hi"),
        Message(
            role="assistant",
            content=[ThinkingBlock(thinking="", signature="EqX"), *Message.assistant("Hi").content],
        ),
        Message.user("again"),
    ]
    model = claude(hosted, made, "claude-sonnet-4-6")
    wire = model.wire_request(ChatRequest(system="You are Parley.", messages=history))
    assert "thinking" not in wire and "output_config" not in wire
    assert _plain(wire["messages"][1]["content"]) == [{"type": "text", "text": "Hi"}]
    assert wire["max_tokens"] == 4096


async def test_another_requester_gets_no_thinking_or_memories_of_the_first(hosted, made) -> None:
    """In a shared channel the next person's run keeps the history, but not the first
    person's thinking about their tool results nor the memories recalled for them."""
    hosted.script(fa.tool("lookup", city="Lyon"), fa.text("Lyon: 2 million."))
    first = await agent(claude(hosted, made)).run("Lyon?", CONTEXT)
    assert any(m.thinking for m in first.state.messages)
    assert any("memory" in m.context for m in first.state.messages)
    other = RunContext(conversation_id="c", platform="console", user_id="v", chat_id="c")
    hosted.script(fa.text("Hello."))
    second = await agent(claude(hosted, made)).run("Hi", other, history=first.state)
    accepted(hosted)
    assert isinstance(second, Finished)
    sent_now = str(hosted.message_calls[-1].body["messages"][:-1])
    assert "memory 1" not in sent_now and "'thinking'" not in sent_now


async def test_side_jobs_use_the_smaller_model(hosted, made) -> None:
    """Compaction summaries go to the side model (`PARLEY_ANTHROPIC_SIDE_MODEL`), the chat
    to the chat model."""
    steps = itertools.count()

    def respond(body: dict) -> fa.Item:  # type: ignore[type-arg]
        if "<transcript>" in str(body.get("messages")):
            return fa.text("A summary of earlier turns.")
        return fa.tool("lookup", city="X" * 600) if next(steps) < 6 else fa.text("Done.")

    hosted.responder = respond
    side = claude(hosted, made, "claude-haiku-5-5")
    config = AgentConfig(context_tokens=3500, max_steps=10)
    chat = agent(claude(hosted, made), config=config, side_model=side)
    outcome = await chat.run("Look up a lot", CONTEXT)
    accepted(hosted)
    assert isinstance(outcome, Finished) and outcome.state.summary
    models = {
        ("summary" if "<transcript>" in str(c.body["messages"]) else "chat", c.body["model"])
        for c in hosted.message_calls
    }
    assert models == {("summary", "claude-haiku-5-5"), ("chat", SONNET)}


async def test_the_side_model_shares_the_chat_model_s_fallback_and_breaker(
    monkeypatch, redis
) -> None:
    from bot.config import Settings
    from bot.wiring.models import build_chat_model, build_side_model

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_MODEL", SONNET)
    assert build_side_model(Settings.load(env_file=None), chat := object()) is chat  # type: ignore[arg-type]
    monkeypatch.setenv("PARLEY_ANTHROPIC_SIDE_MODEL", "claude-haiku-5-5")
    settings = Settings.load(env_file=None)
    main = build_chat_model(settings, redis)
    side = build_side_model(settings, main)
    try:
        assert isinstance(main, FallbackModel) and isinstance(side, FallbackModel)
        assert side.primary.inner.model == "claude-haiku-5-5"  # type: ignore[attr-defined]
        assert side.fallback is main.fallback and side.breaker is main.breaker
        assert main.primary.inner.effort == "medium"  # type: ignore[attr-defined]
    finally:
        await main.close()  # type: ignore[attr-defined]
        if isinstance(side, FallbackModel):
            await side.primary.close()  # type: ignore[attr-defined]


async def test_a_run_stopped_midway_then_the_next_objective(hosted, made) -> None:
    """/cancel or a stop button between steps: the history keeps the stopped run's turns,
    and the next objective's request is still one the current generation accepts."""
    import asyncio

    stop = asyncio.Event()

    @tool
    async def slow_lookup(city: str) -> str:
        """Look a city up (the person presses stop meanwhile)."""
        stop.set()
        return f"{city}: 2 million"

    registry = tools()
    registry.register(slow_lookup)
    hosted.script(fa.tool("slow_lookup", thought="Looking it up.", city="Lyon"))
    model = claude(hosted, made)
    stopped = await Agent(model, registry, recall=ChangingRecall()).run("Lyon?", CONTEXT, stop=stop)
    assert getattr(stopped, "reason", None) == "stopped"
    hosted.script(fa.text("Nice is smaller."))
    after = await Agent(model, registry, recall=ChangingRecall()).run(
        "And Nice?", CONTEXT, history=stopped.state
    )
    accepted(hosted)
    assert isinstance(after, Finished) and after.answer == "Nice is smaller."
