"""`/parley` answers privately through the command's response_url, so it works in channels
Parley is not in; an unknown subcommand is answered privately too. slack-bolt with signed
requests, the fake Web API playing the response_url."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import ScriptedModel
from tests.fakes import slack as fs

ELSEWHERE = "CNOTIN"  # a channel Parley is not a member of


async def test_parley_answers_through_the_response_url_in_a_channel_parley_is_not_in(
    redis: aioredis.Redis,
) -> None:
    async with slack_bot(redis, ScriptedModel([])) as s:
        s.fake.answer_error("chat.postEphemeral", "channel_not_found", times=5)
        url = s.fake.response_url()
        await s.form(fs.slash_command("UANA", "status", channel=ELSEWHERE, response_url=url))
        await s.form(fs.slash_command("UANA", "frobnicate", channel=ELSEWHERE, response_url=url))
        await until(lambda: len(s.fake.responses) == 2, within=15)
        await s.harness.settle()
    status, unknown = s.fake.responses
    assert status["response_type"] == unknown["response_type"] == "ephemeral"
    assert status["text"].startswith("I'm not working on anything for you right now.")
    assert unknown["text"] == "I don't know the command /parley frobnicate. Try /parley help."
    assert not s.fake.method_calls("chat.postMessage")  # nothing public
    assert not s.fake.method_calls("chat.postEphemeral")


async def test_an_expired_response_url_falls_back_to_an_ephemeral_message(
    redis: aioredis.Redis,
) -> None:
    async with slack_bot(redis, ScriptedModel([])) as s:
        s.fake.response_status = 404
        url = s.fake.response_url()
        await s.form(fs.slash_command("UANA", "nope", channel="CGEN", response_url=url))
        await until(lambda: bool(s.fake.in_channel("CGEN")), within=15)
        await s.harness.settle()
    [post] = s.fake.in_channel("CGEN")
    assert post.ephemeral_to == "UANA" and "/parley nope" in post.text
    assert not s.fake.method_calls("chat.postMessage")
