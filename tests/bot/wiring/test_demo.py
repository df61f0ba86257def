"""The demo's stand-in model: which tool each kind of request gets, and the label."""

from __future__ import annotations

import pytest

from agent.builtin_tools import builtin_registry
from agent.messages import ChatRequest, Message, TextBlock, ToolResultBlock, ToolUseBlock
from bot.wiring.demo import LABEL, DemoModel

TOOLS = builtin_registry(60).specs()


@pytest.mark.parametrize(
    ("asked", "name", "args"),
    [
        ("remember that my bike is green", "remember", {"text": "my bike is green"}),
        ("What do you remember about me?", "list_memories", {}),
        ("pick tea or coffee for me", "ask_user", {"options": ["Tea", "Coffee"]}),
        ("remind me to stretch in 30 seconds", "create_reminder", {"text": "stretch"}),
        ("every minute tell me the time", "schedule", {"when": "every 1 minutes"}),
        ("every 2 hours, water the plants", "schedule", {"objective": "water the plants"}),
    ],
)
async def test_a_request_gets_the_tool_its_words_ask_for(
    asked: str, name: str, args: dict[str, object]
) -> None:
    request = ChatRequest(system="", messages=[Message.user(asked)], tools=TOOLS)
    response = await DemoModel().complete(request)
    [block] = response.message.content
    assert isinstance(block, ToolUseBlock) and block.name == name
    assert args.items() <= block.input.items()


async def test_every_answer_is_labelled_and_recalled_memories_are_used() -> None:
    system = "Memories:\n- [m1] (fact) my bike is a green Brompton\n"
    request = ChatRequest(system=system, messages=[Message.user("what bike?")], tools=TOOLS)
    answer = (await DemoModel().complete(request)).message.text
    assert answer.startswith(f"{LABEL} From what you told me before: my bike is a green Brompton")
    used = ToolUseBlock(id="t1", name="remember", input={"text": "x"})
    done = ToolResultBlock(tool_use_id="t1", content="ok")
    after = ChatRequest(
        system="",
        messages=[
            Message.user("remember x"),
            Message(role="assistant", content=[used]),
            Message(role="user", content=[done]),
        ],
    )
    assert (await DemoModel().complete(after)).message.text.startswith(f"{LABEL} Noted")
    blank = ChatRequest(system="", messages=[Message(role="user", content=[TextBlock(text="hi")])])
    assert (await DemoModel().complete(blank)).message.text.startswith(f"{LABEL} I'm the demo")
