"""`parley console` driven through its stdin/stdout against the fake provider servers."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama


async def start_console(
    env: dict[str, str], *, stderr: int, demo: bool = False
) -> asyncio.subprocess.Process:
    """`parley console` (`--demo`) as its own process, with only `env` for settings."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PARLEY_", "ANTHROPIC_", "OLLAMA_"))
    }
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot.cli", "--env-file", "/dev/null", "console"),
        *(["--demo"] if demo else []),
        env={**base, **env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )


async def console(env: dict[str, str], lines: list[str]) -> tuple[int, str]:
    process = await start_console(env, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(process.communicate("\n".join(lines).encode() + b"\n"), 90)
    return process.returncode or 0, out.decode()


async def test_a_conversation_with_a_question_and_approvals(redis_url: str) -> None:
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(
            fa.text("Hi there!"),
            fa.tool("ask_user", question="Tea or coffee?", options=["Tea", "Coffee"]),
            fa.text("Coffee it is."),
            fa.tool("create_reminder", text="stretch", in_seconds=3600),
            fa.text("Reminder set."),
            fa.tool("create_reminder", text="call mum", in_seconds=3600),
            fa.text("OK, I won't."),
        )
        code, out = await console(
            {
                "REDIS_URL": redis_url,
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": hosted.url,
                "OLLAMA_HOST": local.url,
            },
            [
                "hello",
                "pick a drink for me",
                "2",
                "remind me to stretch in an hour",
                "y",
                "remind me to call mum",
                "no, not today",
                "/quit",
            ],
        )
    assert code == 0, out
    assert "parley> Hi there!" in out
    assert "parley asks> Tea or coffee?" in out and "  2. Coffee" in out
    assert "parley> Coffee it is." in out
    assert "1. Remind you: stretch" in out or "stretch" in out.split("parley wants to:")[1]
    assert "approved." in out and "parley> Reminder set." in out
    assert "rejected." in out and "parley> OK, I won't." in out
    answered = hosted.message_calls[2].body["messages"][-1]["content"][0]
    assert answered["type"] == "tool_result" and "Coffee" in str(answered["content"])
    refused = hosted.message_calls[6].body["messages"][-1]["content"][0]
    assert refused["is_error"] and "not today" in str(refused["content"])


async def test_no_reachable_provider_says_what_to_configure(redis_url: str) -> None:
    async with FakeOllama(models=["something-else"]) as local:
        code, out = await console(
            {"REDIS_URL": redis_url, "OLLAMA_HOST": local.url, "OLLAMA_MODEL": "qwen2.5:7b"},
            ["hello"],
        )
    assert code == 78  # EX_CONFIG, which `make run` takes as an end without its own error
    assert "ANTHROPIC_API_KEY" in out and "ollama pull qwen2.5:7b" in out
    assert "console --demo` answers with a scripted stand-in" in out
    # what a newcomer after `make run` can type: the settings file and this environment's parley
    assert "in .env (copy .env.example)" in out
    assert f"Then run `{Path(sys.executable).parent.relative_to(Path.cwd())}/parley doctor`" in out
    assert "Traceback" not in out


async def test_memories_and_forget_in_the_console(redis, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(
            fa.tool("remember", text="My bike is a green Brompton"),
            fa.text("Noted."),
            fa.tool("remember", text="I take the 8:10 train"),
            fa.text("Noted too."),
        )
        code, out = await console(
            {
                "REDIS_URL": redis_url,
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": hosted.url,
                "OLLAMA_HOST": local.url,
            },
            [
                "remember my bike is a green Brompton",
                "and that I take the 8:10 train",
                "/memories",
                "/forget 1",
                "/memories",
                "/quit",
            ],
        )
    assert code == 0, out
    first, _, rest = out.partition("Forgotten:")
    told = " — you told me in the console on "
    assert "1. I take the 8:10 train (private)" + told in first
    assert "\n2. My bike is a green Brompton (private)" + told in first
    assert "8:10 train" in rest.splitlines()[0]
    assert (
        "1. My bike is a green Brompton (private)" + told in rest
        and "8:10" not in rest.split("\n", 1)[1]
    )
    assert len(hosted.message_calls) == 4  # the commands never reached the model
