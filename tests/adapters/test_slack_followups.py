"""A bare `@Parley` in a channel, then the question as a reply in that thread: answered there.
The corpus's real app_mention payload, through slack-bolt, the runtime and a scripted model."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.adapters.test_corpus_findings import corpus
from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import slack as fs


async def test_the_question_after_a_bare_mention_is_answered_in_its_thread(
    redis: aioredis.Redis,
) -> None:
    mention = corpus("slack", "bolt-python__tests_scenario_tests_async_test_app.json#0")["event"]
    mention["text"] = f"<@{fs.BOT_USER}>"
    channel, ts, user = mention["channel"], mention["ts"], mention["user"]
    model = ScriptedModel([reply("Stand-up at ten, then the review.")])
    async with slack_bot(redis, model) as s:
        await s.event(mention)
        await until(lambda: len(s.fake.in_channel(channel)) == 1, within=15)
        await s.harness.settle()
        # Someone else's chatter in another thread stays someone else's.
        await s.event(fs.channel_message("UBOB", "lunch?", channel=channel, thread_ts="1.000001"))
        question = fs.channel_message(user, "what's on today?", channel=channel, thread_ts=ts)
        await s.event(question)
        await until(lambda: len(s.fake.in_channel(channel)) == 2, within=15)
        await s.harness.settle()
    prompt, answer = s.fake.in_channel(channel)
    assert prompt.thread_ts == ts and "reply here" in prompt.body
    assert answer.thread_ts == ts and answer.body == "Stand-up at ten, then the review."
    assert model.turn_requests[0].messages[-1].text == "what's on today?"
    assert len(model.turn_requests) == 1
