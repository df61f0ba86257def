"""History reads under Slack's rate limits (the reduced limits of apps outside the
Marketplace): a rate-limited conversations.replies from the fake Web API, through the real
slack-sdk, on the real runtime with a scripted model."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import HistoryLimited
from adapters.slack.context import ThreadReader
from adapters.slack.limits import HistoryLimits
from bot.conversation.attachments import HISTORY_UNREAD
from bot.conversation.texts import HISTORY_LIMITED
from tests.adapters.test_slack import slack_bot
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until

pytestmark = pytest.mark.network  # a fake Slack on a local port


def _later(root: str, by: int) -> str:
    seconds, _, micros = root.partition(".")
    return f"{seconds}.{int(micros) + by:06d}"


async def test_a_rate_limited_thread_read_degrades_and_says_so_once(redis) -> None:
    model = ScriptedModel([reply("Monday, I believe."), reply("Still Monday.")])
    async with slack_bot(redis, model) as s:
        root = fs.message_ts()
        s.fake.thread("CGEN", root, ("UANA", "Shall we ship on Friday?"), ("UBOB", "Monday"))
        s.fake.fail_next("conversations.replies", retry_after=30)  # a minute-scale limit
        first = fs.mention_event("UANA", "what did we decide?", thread_ts=root, ts=_later(root, 5))
        await s.event(first)
        await until(lambda: any(p.text == "Monday, I believe." for p in s.fake.posts))
        await s.harness.settle()
        # within the Retry-After, another mention in the thread: no read is even sent
        again = fs.mention_event("UBOB", "and the notes?", thread_ts=root, ts=_later(root, 9))
        await s.event(again)
        await until(lambda: any(p.text == "Still Monday." for p in s.fake.posts))
        await s.harness.settle()
        texts = [p.text for p in s.fake.in_channel("CGEN", root)]
    assert texts == [HISTORY_LIMITED, "Monday, I believe.", "Still Monday."]  # said once
    assert len(s.fake.method_calls("conversations.replies")) == 1  # Retry-After honoured
    asked = model.turn_requests[0].messages[-1].text
    assert HISTORY_UNREAD in asked and "Shall we ship" not in asked
    assert asked.endswith("what did we decide?")


async def test_a_short_retry_after_is_waited_once_and_the_thread_read() -> None:
    waited: list[float] = []

    async def sleep(seconds: float) -> None:  # an injected clock: nothing really sleeps
        waited.append(seconds)

    async with FakeSlack() as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        reader = ThreadReader(client=client, limits=HistoryLimits(wait=2.0, sleep=sleep))
        root = fs.message_ts()
        fake.thread("CGEN", root, ("UANA", "Shall we ship on Friday?"))
        fake.fail_next("conversations.replies", retry_after=1)
        found = await reader.history("CGEN", root, _later(root, 5), fs.BOT_USER)
        assert [m.text for m in found] == ["Shall we ship on Friday?"]
        assert waited == [1.0]
        # twice limited in a row: the second is not waited for again
        fake.fail_next("conversations.replies", retry_after=1)
        fake.fail_next("conversations.replies", retry_after=1)
        with pytest.raises(HistoryLimited):
            await reader.history("CGEN", root, _later(root, 5), fs.BOT_USER)
        assert waited == [1.0, 1.0]


async def test_a_rate_limited_channel_read_is_a_tool_refusal_not_a_failure() -> None:
    now = [1000.0]
    async with FakeSlack() as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        reader = ThreadReader(client=client, limits=HistoryLimits(wait=0, clock=lambda: now[0]))
        fake.members["CGEN"] = [fs.BOT_USER]
        fake.history["CGEN"] = [{"type": "message", "user": "UANA", "text": "hi", "ts": "1.000100"}]
        fake.fail_next("conversations.history", retry_after=45)
        with pytest.raises(HistoryLimited, match="about 45 seconds"):
            await reader.channel_history("CGEN", 0.0, fs.BOT_USER)
        now[0] += 30
        with pytest.raises(HistoryLimited, match="about 15 seconds"):
            await reader.channel_history("CGEN", 0.0, fs.BOT_USER)
        assert len(fake.method_calls("conversations.history")) == 1
        now[0] += 16  # past the Retry-After: read again
        found = await reader.channel_history("CGEN", 0.0, fs.BOT_USER)
        assert [m.text for m in found] == ["hi"]
        assert len(fake.method_calls("conversations.history")) == 2
