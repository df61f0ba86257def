"""Slack's Agents & AI Apps surface through Bolt's assistant middleware, against the fake
Web API: greeting and suggested prompts, the thread title, the channel the user looks at."""

from __future__ import annotations

from tests.adapters.test_slack import slack_bot, until
from tests.agent.scripted import ScriptedModel, reply
from tests.fakes import slack as fs


def last_text(model: ScriptedModel) -> str:
    return model.requests[-1].messages[-1].text


async def test_a_new_assistant_thread_is_greeted_titled_and_knows_where_the_user_looks(
    redis,
) -> None:
    model = ScriptedModel([reply("Here is a summary."), reply("And that one too.")])
    prompts = ("What can you do?", "Summarise this channel")
    async with slack_bot(redis, model, suggested_prompts=prompts, surface="assistant") as s:
        started = fs.assistant_thread_started("UANA", viewing="CGEN")
        thread = started["assistant_thread"]["thread_ts"]
        await s.event(started)
        await until(lambda: bool(s.fake.method_calls("assistant.threads.setSuggestedPrompts")))
        (greeting,) = s.fake.in_channel("DANA")
        assert greeting.thread_ts == thread and "Parley" in greeting.text
        offered = s.fake.method_calls("assistant.threads.setSuggestedPrompts")[0].body
        assert offered["thread_ts"] == thread
        assert [p["message"] for p in offered["prompts"]] == list(prompts)

        await s.event(fs.dm_event("UANA", "Summarise this channel for me", thread_ts=thread))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2)
        await s.harness.settle()
        (title,) = s.fake.method_calls("assistant.threads.setTitle")
        assert title.body["title"] == "Summarise this channel for me"
        assert title.body["thread_ts"] == thread
        assert "<#CGEN>" in last_text(model)

        await s.event(fs.assistant_context_changed(started, "CRANDOM"))
        await s.event(fs.dm_event("UANA", "and this one?", thread_ts=thread))
        await until(lambda: len(s.fake.in_channel("DANA")) == 3)
        await s.harness.settle()
        assert "<#CRANDOM>" in last_text(model)
        assert len(s.fake.method_calls("assistant.threads.setTitle")) == 1  # titled once


async def test_a_title_slack_refuses_costs_nothing_but_the_title(redis) -> None:
    model = ScriptedModel([reply("Done.")])
    async with slack_bot(redis, model, surface="assistant") as s:
        started = fs.assistant_thread_started("UANA", viewing="CGEN")
        thread = started["assistant_thread"]["thread_ts"]
        await s.event(started)
        await until(lambda: bool(s.fake.in_channel("DANA")))
        s.fake.answer_error("assistant.threads.setTitle", "internal_error", status=500)
        response = await s.event(fs.dm_event("UANA", "Plan my week", thread_ts=thread))
        assert response.status == 200  # stored and acknowledged all the same
        await until(lambda: len(s.fake.in_channel("DANA")) == 2)
        await s.harness.settle()
        assert s.fake.in_channel("DANA")[-1].text == "Done."
        assert await s.harness.redis.xlen(s.harness.runtime.keys.inbox) == 1
