"""What the chat shows, once, when the model's stream breaks: before its first visible text
(the local model answers from the start) or after it (the shown text stays; the local model
finishes it after one sentence, or one sentence says the answer was cut). Slack thread
streams and Telegram group messages edited as they grow, with the real SDKs, the real
Anthropic and Ollama clients, and the fallback between them."""

from __future__ import annotations

import redis.asyncio as aioredis

from agent.llm.anthropic import AnthropicModel
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.outcomes import FAIL_MESSAGES
from agent.stop_reasons import REFUSED
from tests.adapters.test_slack_stream import slack_bot, until
from tests.adapters.test_telegram_stream import ANA, GROUP, bot
from tests.bot.wiring.test_console import console
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes import slack as fs
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.cuts import Cut
from tests.fakes.ollama import FakeOllama
from tests.fakes.telegram import FakeTelegram

HOSTED = "The hosted model got this far and then"
LOCAL = "the local model wrote the rest."
TAKES_OVER = "my local model finishes the answer"


def fallback(redis: aioredis.Redis, hosted: FakeAnthropic, local: FakeOllama) -> FallbackModel:
    return FallbackModel(
        AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url),
        OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096),
        redis_breaker(redis, "parley:breaker:anthropic", "anthropic", BreakerPolicy()),
        timeout=10,
    )


def shown_then_broken() -> fa.Item:
    """About 1.5 s of writing (shown after the first-show hold), then an error event."""
    return fa.broken(HOSTED, "overloaded_error", pace=0.3)


def broken_before_text() -> fa.Item:
    return fa.Item("text", [{"type": "text", "text": HOSTED}], cut=Cut(at=1, how="drop"))


async def slack_answer(redis: aioredis.Redis, hosted_item: fa.Item, local_item: fo.ChatItem):
    async with (
        FakeOllama() as local,
        slack_bot(redis, make_model=lambda hosted: fallback(redis, hosted, local)) as s,
    ):
        s.hosted.script(hosted_item)
        local.script(local_item)
        await s.event(fs.mention_event("UANA", "tell me"))
        await until(lambda: any(not p.streaming for p in s.fake.in_channel("CGEN")))
        await s.harness.settle()
        posts = s.fake.in_channel("CGEN")
        assert len(posts) == 1, "the answer arrives exactly once"
        assert len(s.fake.method_calls("chat.stopStream")) <= 1
        return posts[0], s.fake


async def test_slack_a_cut_after_shown_text_keeps_it_and_the_fallback_finishes(redis) -> None:
    post, fake = await slack_answer(redis, shown_then_broken(), fo.reply(LOCAL))
    text = post.text.replace("\n", " ")
    assert text.startswith(HOSTED) and text.endswith(LOCAL) and TAKES_OVER in text
    assert any(HOSTED.startswith(seen) and seen for seen in post.appends), "it was shown"
    assert not fake.method_calls("chat.postMessage")


async def test_slack_a_cut_the_fallback_cannot_finish_is_marked_and_said(redis) -> None:
    post, _ = await slack_answer(redis, shown_then_broken(), fo.failure(500))
    text = post.text.replace("\n", " ")
    assert text.startswith(HOSTED + "…") and FAIL_MESSAGES["cut"] in text
    assert TAKES_OVER not in text


async def test_slack_a_cut_before_any_text_is_answered_afresh(redis) -> None:
    post, _ = await slack_answer(redis, broken_before_text(), fo.reply("A whole local answer."))
    assert post.text.replace("\n", " ") == "A whole local answer."


async def telegram_answer(
    redis: aioredis.Redis, telegram: FakeTelegram, hosted_item: fa.Item, local_item: fo.ChatItem
):
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(hosted_item)
        local.script(local_item)
        model = fallback(redis, hosted, local)
        async with bot(redis, telegram, hosted, model=model, PARLEY_STREAM_INTERVAL=0.05) as (
            harness,
            _,
        ):
            text = "@parley_bot hi"
            telegram.push(
                telegram.message(chat_id=GROUP, user_id=ANA, text=text, chat_type="group")
            )
            await until(lambda: "answer" in "".join(p.text for p in telegram.chat(GROUP)))
            await harness.settle()
        continued = local.calls("/api/chat")[-1].body["messages"] if local.requests else []
    (message,) = telegram.chat(GROUP)  # exactly once
    assert len(telegram.method_calls("sendMessage")) == 1
    return message, continued


async def test_telegram_a_cut_after_shown_text_keeps_it_and_the_fallback_finishes(
    redis, telegram: FakeTelegram
) -> None:
    message, continued = await telegram_answer(
        redis, telegram, shown_then_broken(), fo.reply("so the answer ends here.")
    )
    assert message.text.startswith(HOSTED) and message.text.endswith("so the answer ends here.")
    assert TAKES_OVER in message.text
    assert any(e and HOSTED.startswith(e) for e in message.edits), "the partial text showed"
    assert continued[-2] == {"role": "assistant", "content": HOSTED}


async def test_telegram_a_cut_the_fallback_cannot_finish_is_marked_and_said(
    redis, telegram: FakeTelegram
) -> None:
    message, _ = await telegram_answer(redis, telegram, shown_then_broken(), fo.failure(500))
    assert message.text.startswith(HOSTED + "…") and FAIL_MESSAGES["cut"] in message.text
    assert any(e and HOSTED.startswith(e) for e in message.edits), "the partial text showed"


async def test_telegram_a_cut_before_any_text_is_answered_afresh(
    redis, telegram: FakeTelegram
) -> None:
    message, _ = await telegram_answer(
        redis, telegram, broken_before_text(), fo.reply("A whole local answer.")
    )
    assert message.text == "A whole local answer." and not message.edits


async def console_answer(redis_url: str, local_item: fo.ChatItem) -> str:
    async with FakeAnthropic() as hosted, FakeOllama() as local:
        hosted.script(shown_then_broken())
        local.script(local_item)
        env = {
            "REDIS_URL": redis_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": hosted.url,
            "OLLAMA_HOST": local.url,
        }
        code, out = await console(env, ["tell me", "/quit"])
    assert code == 0, out
    assert out.count(HOSTED) == 1, out  # printed as it came, never again
    return out


async def test_console_a_cut_answer_is_kept_and_finished_by_the_fallback(redis_url: str) -> None:
    out = await console_answer(redis_url, fo.reply(LOCAL))
    assert out.index(HOSTED) < out.index(TAKES_OVER) < out.index(LOCAL), out


async def test_console_a_cut_the_fallback_cannot_finish_says_so(redis_url: str) -> None:
    out = await console_answer(redis_url, fo.failure(500))
    assert f"{HOSTED}…" in out and FAIL_MESSAGES["cut"] in out, out
    assert TAKES_OVER not in out


async def test_slack_a_refusal_replaces_what_was_shown_with_one_sentence(redis) -> None:
    async with slack_bot(redis) as s:
        refused = fa.Item(
            "text", [{"type": "text", "text": HOSTED}], pace=0.3, stop_reason="refusal"
        )
        s.hosted.script(refused)
        await s.event(fs.mention_event("UANA", "tell me"))
        await until(lambda: any(not p.streaming for p in s.fake.in_channel("CGEN")))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.appends, "the refused text had been shown while it was written"
        assert post.text.replace("\n", " ") == REFUSED
