"""A schedule made in Slack: the owner's time zone comes from `users.info` (`tz`), the prompt
shows the next runs in it, and the schedule runs in the thread where it was made, while its
owner is still in the channel (asked of `conversations.members` at every slot)."""

from __future__ import annotations

from tests.adapters import test_slack as ts
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs


async def test_a_slack_schedule_runs_in_the_owners_zone_and_its_thread(redis) -> None:
    model = ScriptedModel(
        [
            turn(call("schedule", when="0 9 * * 1-5", objective="summarise #support")),
            reply("Set."),
            reply("Support was quiet."),
        ]
    )
    async with ts.slack_bot(redis, model) as s:
        s.fake.users["UANA"] = "Ana"
        s.fake.zones["UANA"] = "America/New_York"
        s.fake.members["CGEN"] = ["UANA", "UBOB", fs.BOT_USER]  # asked at every slot
        mention = fs.mention_event("UANA", "every weekday at 9 summarise #support")
        await s.event(mention)
        # the prompt arrives as a stream: wait for its text, not for its first (empty) piece
        await ts.until(lambda: any("this thread" in p.body for p in s.fake.in_channel("CGEN")))
        prompt = s.fake.in_channel("CGEN")[0]
        assert "time zone America/New_York" in prompt.body and "this thread" in prompt.body
        assert prompt.body.count(" 09:00:00 E") == 3  # EST or EDT: New York's 9 o'clock
        assert (await s.form(fs.block_action(prompt, "Approve", user="UANA"))).status == 200
        await ts.until(lambda: len(s.fake.in_channel("CGEN")) == 2)
        await s.harness.settle()
        [(made, slot)] = await s.harness.runtime.schedules.everything()
        assert made.timezone == "America/New_York" and made.owner_id == "UANA"
        assert slot is not None

        await s.harness.runtime.clock.start_due(now=slot)
        await ts.until(lambda: len(s.fake.in_channel("CGEN")) == 3)
        await s.harness.settle()
        run = s.fake.in_channel("CGEN")[2]
        assert run.body.endswith("Support was quiet.") and run.thread_ts == mention["ts"]
        # /parley schedules in the channel lists the schedule made in one of its threads
        await s.form(fs.slash_command("UANA", "schedules"))
        await ts.until(lambda: len(s.fake.in_channel("CGEN")) == 4)
        await s.harness.settle()
        listing = s.fake.in_channel("CGEN")[3]
        assert f"id {made.id}" in listing.body and "America/New_York" in listing.body
        assert [b["text"]["text"] for b in listing.buttons] == ["Pause 1", "Delete 1"]


async def test_a_schedule_whose_owner_left_the_workspace_pauses_and_says_so(redis) -> None:
    model = ScriptedModel(
        [turn(call("schedule", when="0 9 * * *", objective="post the numbers")), reply("Set.")]
    )
    async with ts.slack_bot(redis, model) as s:
        s.fake.users["UANA"] = "Ana"
        await s.event(fs.dm_event("UANA", "every day at 9 post the numbers"))
        await ts.until(lambda: bool(s.fake.in_channel("DANA")))
        prompt = s.fake.in_channel("DANA")[0]
        await s.form(fs.block_action(prompt, "Approve", user="UANA"))
        await ts.until(lambda: len(s.fake.in_channel("DANA")) == 2)
        await s.harness.settle()
        [(made, slot)] = await s.harness.runtime.schedules.everything()
        assert slot is not None
        s.fake.deactivated.add("UANA")
        s.adapter._threads._users.clear()  # as an hour later, when the cached record is old
        await s.harness.runtime.clock.start_due(now=slot)
        await ts.until(lambda: len(s.fake.in_channel("DANA")) == 3)
        await s.harness.settle()
        said = s.fake.in_channel("DANA")[2].body
        assert said.startswith(f"⏸ I paused schedule {made.id}") and "left the workspace" in said
        assert "`/parley schedules`" in said  # Slack's syntax, not Telegram's
        paused = await s.harness.runtime.schedules.get(made.id)
        assert paused is not None and paused.state == "paused"
        assert len(model.requests) == 2  # the slot never reached the model


async def test_a_schedule_whose_owner_left_the_channel_pauses_instead_of_running(redis) -> None:
    """Attack: Ana made a schedule in #general, then left the channel (or was removed); the
    slot must not go on acting in her name there. Slack is asked at the slot."""
    model = ScriptedModel(
        [turn(call("schedule", when="0 9 * * *", objective="post the numbers")), reply("Set.")]
    )
    async with ts.slack_bot(redis, model) as s:
        s.fake.users["UANA"] = "Ana"
        s.fake.members["CGEN"] = ["UANA", "UBOB", fs.BOT_USER]
        await s.event(fs.mention_event("UANA", "every day at 9 post the numbers"))
        await ts.until(lambda: any("this thread" in p.body for p in s.fake.in_channel("CGEN")))
        prompt = s.fake.in_channel("CGEN")[0]
        await s.form(fs.block_action(prompt, "Approve", user="UANA"))
        await ts.until(lambda: len(s.fake.in_channel("CGEN")) == 2)
        await s.harness.settle()
        [(made, slot)] = await s.harness.runtime.schedules.everything()
        assert slot is not None
        s.fake.members["CGEN"] = ["UBOB", fs.BOT_USER]  # Ana left #general
        await s.harness.runtime.clock.start_due(now=slot)
        await ts.until(lambda: len(s.fake.in_channel("CGEN")) == 3)
        await s.harness.settle()
        said = s.fake.in_channel("CGEN")[2].body
        assert (
            said.startswith(f"⏸ I paused schedule {made.id}") and "no longer in this chat" in said
        )
        paused = await s.harness.runtime.schedules.get(made.id)
        assert paused is not None and paused.state == "paused"
        assert len(model.requests) == 2  # the slot never reached the model
