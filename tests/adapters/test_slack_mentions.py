"""What Parley posts in Slack pings only the people its requester pinged (or Parley names)."""

from __future__ import annotations

from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import ScriptedModel, reply
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
