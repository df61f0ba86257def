"""Who Parley pings in Slack, and who counts as an approver when Slack cannot say."""

from __future__ import annotations

from tests.adapters.test_slack import RAN, slack_bot, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs


async def test_a_model_cannot_ping_the_channel(redis) -> None:
    model = ScriptedModel([reply("Done <!channel> <!subteam^SOPS|@ops> <@UEVE> — cc <@UANA>")])
    async with slack_bot(redis, model) as s:
        await s.event(fs.mention_event("UANA", "summarise please"))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        body = s.fake.in_channel("CGEN")[0].body
        assert "<!channel>" not in body and "<!subteam^SOPS" not in body and "<@UEVE>" not in body
        assert "@\u2060channel" in body and "@\u2060ops" in body
        assert "<@UANA>" in body  # the requester may be named


async def test_mentions_the_requester_typed_still_ping(redis) -> None:
    model = ScriptedModel([reply("<!here> <@UBOB>: the deploy is done. <!channel>")])
    async with slack_bot(redis, model) as s:
        await s.event(fs.mention_event("UANA", "tell <!here> and <@UBOB> the deploy is done"))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        body = s.fake.in_channel("CGEN")[0].body
        assert "<!here>" in body and "<@UBOB>" in body and "<!channel>" not in body


async def test_an_unreadable_approver_group_only_means_no_approver(redis) -> None:
    RAN.clear()
    model = ScriptedModel([turn(call("post_update", channel="general"))])
    async with slack_bot(redis, model, approvers=["SADMINS"]) as s:
        s.fake.groups["SADMINS"] = ["UBOSS"]
        await s.event(fs.mention_event("UANA", "post the update"))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        approval = s.fake.in_channel("CGEN")[0]
        s.fake.answer_error("usergroups.users.list", "internal_error", status=500)
        response = await s.form(fs.block_action(approval, "Approve", user="UBOSS"))
        assert response.status == 200  # the press is stored and acknowledged all the same
        await until(lambda: any(p.ephemeral_to == "UBOSS" for p in s.fake.posts))
        await s.harness.settle()
        assert RAN == [] and approval.buttons  # Boss counts as no approver this time
