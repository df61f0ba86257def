"""`parley console` shows the current step while thinking and prints the answer as it comes."""

from __future__ import annotations

from tests.bot.wiring.test_console import console
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

ANSWER = "Six times seven is 42, as the calculator confirms."


async def test_the_answer_streams_once_after_the_steps_show(redis_url: str) -> None:
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(
            fa.tool("calculator", thought="Let me compute that.", expression="6*7"),
            fa.streamed(ANSWER, chunk=4),
        )
        env = {
            "REDIS_URL": redis_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": hosted.url,
            "OLLAMA_HOST": local.url,
        }
        code, out = await console(env, ["what is 6*7?", "/quit"])
    assert code == 0, out
    assert out.count(ANSWER) == 1 and f"parley> {ANSWER}\n" in out
    assert "… Thinking…" in out, out
    assert out.index("… Let me compute that.") < out.index(f"parley> {ANSWER}")
    assert hosted.message_calls[-1].body["stream"] is True
