"""Slack agent session statuses as Slack defines them, through one conversation: `processing`
while a run works, `suspended` while it waits for a person, `active` after an answer or a
stop, `closed` only when the conversation ends. The fake records every setStatus call."""

from __future__ import annotations

import asyncio

from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import call, reply, turn
from tests.bot.conversation.test_stop import Hanging
from tests.fakes import slack as fs


def changes(statuses: list[str]) -> list[str]:
    """The statuses a person saw, each once however many calls set it."""
    return [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]


async def test_a_question_an_approval_a_stop_and_an_answer_in_one_session(redis) -> None:
    model = Hanging(
        turn(call("ask_user", question="Which week?", options=["This", "Next"])),
        turn(call("post_update", channel="CGEN")),
        reply("Four."),  # after the stop, the person's next question
        hang_at=3,  # the step after the approved post: stopped there
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "plan the offsite and tell the team")
        key = ("CGEN", asked["ts"])
        in_thread = lambda: s.fake.in_channel(*key)  # noqa: E731
        await s.event(asked)
        await until(lambda: len(in_thread()) == 1)  # the question
        await s.harness.settle()
        session = s.fake.sessions[key]
        assert session.statuses == ["processing", "suspended"]
        assert session.title == "plan the offsite and tell the team"
        # the person renames the session in Slack; nothing Parley sends later undoes it
        await s.adapter.client.api_call(
            "agents.sessions.rename",
            json={"channel_id": key[0], "thread_ts": key[1], "title": "Offsite"},
        )

        await s.event(fs.channel_message("UANA", "Next", thread_ts=asked["ts"]))
        await until(lambda: len(in_thread()) == 2)  # the approval prompt
        await s.harness.settle()
        # (the approval prompt is a plan stream, which ends "suspended" too)
        assert changes(session.statuses)[-2:] == ["processing", "suspended"]

        await s.form(fs.block_action(in_thread()[-1], "Approve", user="UANA"))
        await asyncio.wait_for(model.hanging.wait(), 10)
        assert session.statuses[-1] == "processing"
        await s.event(fs.agent_session_stopped("UANA", *key))
        await until(lambda: model.abandoned == 1)
        await until(lambda: any(p.text.startswith("⏹") for p in in_thread()))
        await s.harness.settle()
        assert session.statuses[-1] == "active"  # out of processing; the conversation goes on

        await s.event(fs.channel_message("UANA", "and what is 2+2?", thread_ts=asked["ts"]))
        await until(lambda: in_thread()[-1].text == "Four.")
        await s.harness.settle()
        assert changes(session.statuses) == [
            "processing",  # the first objective
            "suspended",  # its question
            "processing",  # answered
            "suspended",  # its approval
            "processing",  # approved
            "active",  # stopped
            "processing",  # the next question in the same session
            "active",  # answered
        ]
        assert "closed" not in session.statuses
        assert session.title == "Offsite"  # the person's rename stays
        calls = s.fake.method_calls("agents.sessions.setStatus")
        assert [bool(c.body.get("title")) for c in calls] == [True] + [False] * (len(calls) - 1)
        assert [c.body.get("initiator_user_id") for c in calls] == ["UANA"] + [None] * (
            len(calls) - 1
        )
