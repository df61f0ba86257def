"""A Slack group DM (mpim) that Parley is added to works like a private channel: a mention is
answered in its thread, the thread goes on without mentions, and it is a shared conversation
(not anyone's direct chat)."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import slack as fs

MPIM = "GMPIM0001"


async def test_a_group_dm_is_answered_like_a_private_channel(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("Thursday suits everyone."), reply("Booked room 4.")])
    async with slack_bot(redis, model) as s:
        seen = s.recording()
        mention = fs.mention_event("UANA", "when can we meet?", channel=MPIM)
        await s.event(mention)
        # Slack also sends the message event for it (message.mpim): one answer, not two.
        await s.event({**mention, "type": "message", "channel_type": "mpim"})
        await until(lambda: len(s.fake.in_channel(MPIM)) == 1, within=15)
        await s.harness.settle()
        follow_up = fs.channel_message(
            "UBOB", "and a room?", channel=MPIM, thread_ts=mention["ts"], channel_type="mpim"
        )
        await s.event(follow_up)
        await until(lambda: len(s.fake.in_channel(MPIM)) == 2, within=15)
        await s.harness.settle()
    first, second = s.fake.in_channel(MPIM)
    assert first.thread_ts == second.thread_ts == mention["ts"]
    assert (first.body, second.body) == ("Thursday suits everyone.", "Booked room 4.")
    assert all(not e.is_direct for e in seen)
