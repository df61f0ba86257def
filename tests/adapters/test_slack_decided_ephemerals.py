"""A decided private prompt on Slack loses its buttons. An ephemeral message is not the
channel's, so chat.update cannot find it; the press made on it carries a response_url, and
`replace_original` through it replaces the ephemeral for its person (the fake Slack answers a
response_url as Slack does)."""

from __future__ import annotations

from agent.messages import ChatRequest, ChatResponse
from tests.adapters.test_slack import slack_bot, until
from tests.adapters.test_slack_audience import SECRET, _channels, _public, post_note
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs


async def test_a_decided_ephemeral_prompt_is_replaced_without_its_buttons(redis) -> None:
    def ask(request: ChatRequest) -> ChatResponse:
        return turn(call("ask_user", "q1", question="Post a summary?", options=["yes", "no"]))

    model = ScriptedModel(
        [
            turn(call("read_channel", "r1", channel="#finance", since="1d")),
            ask,
            turn(call("post_note", "p1", text="a summary")),
            reply("Posted."),
        ]
    )
    async with slack_bot(
        redis, model, channels=True, approvers=["UBOB"], extra_tools=(post_note,)
    ) as s:
        _channels(s.fake, finance=["UANA"])
        root = fs.message_ts()
        mention = fs.mention_event("UANA", "<@UBOT> what's new in #finance?", thread_ts=root)
        await s.event(mention)
        await until(lambda: any(p.buttons for p in s.fake.in_channel("CGEN")))
        await s.harness.settle()
        [read_prompt] = [p for p in s.fake.in_channel("CGEN") if p.buttons]
        await s.form(s.fake.action(read_prompt, "Approve", user="UANA"))

        def ephemeral_prompts() -> list[fs.Post]:
            return [p for p in s.fake.posts if p.ephemeral_to == "UANA" and p.buttons]

        # the private run's question, answered on its ephemeral: replaced, buttons gone
        await until(lambda: len(ephemeral_prompts()) == 1)
        await s.harness.settle()
        [question] = ephemeral_prompts()
        await s.form(s.fake.action(question, "yes", user="UANA"))
        await until(lambda: question.edits == 1)
        assert not question.buttons and "Post a summary?" in question.text

        # its approval, approved on its ephemeral: the same
        await until(lambda: len(ephemeral_prompts()) == 1)
        await s.harness.settle()
        [approval] = ephemeral_prompts()
        assert approval is not question
        await s.form(s.fake.action(approval, "Approve", user="UANA"))
        await until(lambda: not model.script)
        await s.harness.settle()
        assert approval.edits == 1 and not approval.buttons
        assert ephemeral_prompts() == []
        # replaced for Ana through her presses' response_urls: still hers alone
        assert approval.ephemeral_to == question.ephemeral_to == "UANA"
        replaced = [r for r in s.fake.responses if r.get("replace_original") in (True, "true")]
        assert len(replaced) == 2
        assert any(p.ephemeral_to == "UANA" and "Posted." in p.text for p in s.fake.posts)
    assert SECRET not in _public(s.fake)
