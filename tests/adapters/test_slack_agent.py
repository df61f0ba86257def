"""Slack's agent messaging experience (`features.agent_view`) against the fake Web API: the
Messages tab greets once per person, what the user looks at reaches the agent, each objective
is an agent session whose status follows the run, and the native stop ends a run like
/cancel from the requester."""

from __future__ import annotations

import asyncio
import json

from agent.tools import ToolRegistry, tool
from tests.adapters.test_slack import RAN, Slack, slack_bot, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.conversation.test_stop import Hanging
from tests.fakes import slack as fs

PROMPTS = ("What can you do?", "Summarise this channel")


async def test_opening_the_messages_tab_greets_once_per_person_and_pins_the_prompts(
    redis,
) -> None:
    async with slack_bot(redis, ScriptedModel(), suggested_prompts=PROMPTS) as s:
        await s.event(fs.app_home_opened("UANA", "DANA"))
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.event(fs.app_home_opened("UANA", "DANA"))  # opened again: no second greeting
        await s.event(fs.app_home_opened("UANA", "DANA", tab="home"))  # not the Messages tab
        await s.event(fs.app_home_opened("UBO", "DBO"))
        await until(lambda: bool(s.fake.in_channel("DBO")))
        await s.harness.settle()
        (greeting,) = s.fake.in_channel("DANA")
        assert "Parley" in greeting.text and greeting.thread_ts is None
        assert len(s.fake.in_channel("DBO")) == 1
        pinned = s.fake.method_calls("assistant.threads.setSuggestedPrompts")
        assert len(pinned) == 3  # each Messages tab opening, never the Home tab
        assert "thread_ts" not in pinned[0].body
        assert [p["message"] for p in pinned[0].body["prompts"]] == list(PROMPTS)
        assert not s.fake.method_calls("assistant.threads.setTitle")  # the assistant surface's


async def test_what_the_user_looks_at_reaches_the_agent_with_their_next_message(redis) -> None:
    model = ScriptedModel([reply("That channel is quiet.")])
    async with slack_bot(redis, model) as s:
        await s.event(fs.app_context_changed("UANA", "CGEN"))
        await s.event(fs.dm_event("UANA", "what's going on here?"))
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        assert "<#CGEN>" in model.requests[-1].messages[-1].text


async def test_each_objective_is_a_session_whose_status_follows_the_run(redis) -> None:
    model = ScriptedModel(
        [turn(call("ask_user", question="Which week?", options=["This", "Next"])), reply("Done.")]
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "plan the offsite agenda")
        await s.event(asked)
        await until(lambda: bool(s.fake.in_channel("CGEN", asked["ts"])))
        await s.harness.settle()
        session = s.fake.sessions[("CGEN", asked["ts"])]
        assert session.title == "plan the offsite agenda"
        assert session.initiator == "UANA"  # named once, as the session was created
        (created, *later) = s.fake.method_calls("agents.sessions.setStatus")
        assert created.body["initiator_user_id"] == "UANA"
        assert all("initiator_user_id" not in call.body for call in later)
        assert session.statuses == ["processing", "suspended"]  # waiting for the answer

        await s.event(fs.channel_message("UANA", "Next", thread_ts=asked["ts"]))
        await until(lambda: len(s.fake.in_channel("CGEN", asked["ts"])) == 2)
        await s.harness.settle()
        assert session.statuses == ["processing", "suspended", "processing", "active"]
        assert s.fake.in_channel("CGEN", asked["ts"])[-1].text == "Done."


async def test_the_native_stop_ends_a_run_like_cancel_and_the_session_shows_it(redis) -> None:
    model = Hanging()
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "write the quarterly report")
        await s.event(asked)
        await asyncio.wait_for(model.hanging.wait(), 10)
        # Someone else's stop is refused; the requester's stops the run.
        await s.event(fs.agent_session_stopped("UMAL", "CGEN", asked["ts"]))
        await asyncio.sleep(0.3)
        assert model.abandoned == 0
        await s.event(fs.agent_session_stopped("UANA", "CGEN", asked["ts"]))
        await until(lambda: model.abandoned == 1)
        await s.harness.settle()
        texts = [p.text for p in s.fake.in_channel("CGEN", asked["ts"])]
        assert texts[0].startswith("⏹ Stopped: “write the quarterly report”.")
        # Mallory's, handled in turn: the run is over, and only Ana (or an approver) could stop it
        assert texts[1:] == ["Only <@UANA> or an approver could stop that; it has finished now."]
        assert s.fake.sessions[("CGEN", asked["ts"])].statuses == ["processing", "active"]
        assert len(model.turn_requests) == 1


async def test_a_stop_while_an_approved_action_runs_finishes_it_and_reports_it(redis) -> None:
    ran: list[str] = []
    started = asyncio.Event()

    @tool(side_effects=True, describe=lambda a: f"Post to {a['channel']}")
    async def post_update(channel: str) -> str:
        """Post an update."""
        started.set()
        await asyncio.sleep(0.3)
        ran.append(channel)
        return "posted"

    registry = ToolRegistry()
    registry.register(post_update)
    model = ScriptedModel([turn(call("post_update", channel="CGEN")), reply("never")])
    async with slack_bot(redis, model) as s:
        s.harness.runtime.executor.agent.tools = registry
        asked = fs.mention_event("UANA", "post the update")
        await s.event(asked)
        await until(lambda: bool(s.fake.in_channel("CGEN", asked["ts"])))
        await s.harness.settle()
        (approval,) = s.fake.in_channel("CGEN", asked["ts"])
        await s.form(fs.block_action(approval, "Approve", user="UANA"))
        await asyncio.wait_for(started.wait(), 10)
        await s.event(fs.agent_session_stopped("UANA", "CGEN", asked["ts"]))
        await until(lambda: len(s.fake.in_channel("CGEN", asked["ts"])) == 2)
        await s.harness.settle()
        assert ran == ["CGEN"]
        last = s.fake.in_channel("CGEN", asked["ts"])[-1].text
        assert "Stopped" in last and "Done before the stop: `post_update`." in last
        assert len(model.turn_requests) == 1


async def test_the_greeting_is_not_repeated_once_the_outbox_has_forgotten_it(redis) -> None:
    model = ScriptedModel([reply("Hello.")])
    async with slack_bot(redis, model) as s:
        await s.event(fs.app_home_opened("UANA", "DANA"))
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
        async for key in redis.scan_iter("parley:outbox:*"):  # past PARLEY_DEDUP_TTL
            await redis.delete(key)
        await s.event(fs.app_home_opened("UANA", "DANA"))
        await s.event(fs.dm_event("UANA", "hi"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2)
        await s.harness.settle()
        assert [p.text for p in s.fake.in_channel("DANA")][1:] == ["Hello."]


async def test_tool_steps_show_as_task_updates_in_the_streamed_answer(redis) -> None:
    model = ScriptedModel(
        [turn(call("calculator", expression="6*7")), reply("It is 42.")], latency=0.6
    )
    async with slack_bot(redis, model) as s:
        session = fs.message_ts()  # a thread of Parley's Messages tab
        await s.event(fs.dm_event("UANA", "what is six times seven?", thread_ts=session))
        await until(lambda: bool(s.fake.in_channel("DANA", session)), within=10)
        await s.harness.settle()
        (answer,) = s.fake.in_channel("DANA", session)  # one message: tasks, then answer
        assert answer.text == "It is 42." and not answer.streaming
        assert list(answer.tasks.values()) == [("calculator", "complete")]
        start = s.fake.method_calls("chat.startStream")[0].body
        assert start["task_display_mode"] == "timeline"
        # answered: the conversation goes on, and the stream's end says so too
        assert s.fake.sessions[("DANA", session)].statuses[-2:] == ["active", "active"]


async def test_a_channel_thread_shows_task_updates_too(redis) -> None:
    model = ScriptedModel(
        [turn(call("calculator", expression="6*7")), reply("It is 42.")], latency=0.6
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "what is six times seven?")
        await s.event(asked)
        await until(lambda: bool(s.fake.in_channel("CGEN", asked["ts"])), within=10)
        await s.harness.settle()
        (answer,) = s.fake.in_channel("CGEN", asked["ts"])
        assert answer.text == "It is 42." and answer.display == "timeline"
        assert list(answer.tasks.values()) == [("calculator", "complete")]
        # streamed to the one who asked, as Slack requires in a channel
        start = s.fake.method_calls("chat.startStream")[0].body
        assert (start["recipient_user_id"], start["recipient_team_id"]) == ("UANA", "T1")


async def pressed(s: Slack, channel: str, thread: str, label: str = "Approve") -> fs.Post:
    """Press `label` on the one approval in the thread; the answer the run then gives."""
    await until(lambda: bool(s.fake.in_channel(channel, thread)), within=10)
    await s.harness.settle()
    (approval,) = s.fake.in_channel(channel, thread)
    await s.form(fs.block_action(approval, label, user="UANA"))
    await until(lambda: len(s.fake.in_channel(channel, thread)) == 2, within=10)
    await s.harness.settle()
    return s.fake.in_channel(channel, thread)[-1]


PLAN = [
    {"tool": "post_update", "args": {"channel": "CGEN"}, "description": "Announce in #general"},
    {"tool": "post_update", "args": {"channel": "CRANDOM"}, "description": "Announce in #random"},
]


async def test_an_approved_plan_shows_as_a_plan_update_whose_steps_move_on(redis) -> None:
    model = ScriptedModel(
        [
            turn(call("propose_plan", goal="Announce the offsite", steps=PLAN)),
            turn(call("post_update", channel="CGEN"), call("post_update", channel="CRANDOM")),
            reply("Both announced."),
        ],
        latency=0.6,
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "announce the offsite everywhere")
        await s.event(asked)
        answer = await pressed(s, "CGEN", asked["ts"])
        assert answer.text == "Both announced." and not answer.streaming
        assert answer.display == "plan" and answer.plan == "Announce the offsite"
        assert answer.tasks == {
            "plan-1": ("Announce in #general", "complete"),
            "plan-2": ("Announce in #random", "complete"),
        }
        # the stream opened with the plan, as Slack's chunks name it; the first step running
        proposal, start = s.fake.method_calls("chat.startStream")  # the prompt's, then the run's
        assert proposal.body["chunks"][0]["title"] == "Proposed plan: Announce the offsite"
        assert start.body["task_display_mode"] == "plan"
        chunks = start.body["chunks"]
        assert chunks[0] == {"type": "plan_update", "title": "Announce the offsite"}
        assert [(c["type"], c["id"], c["status"]) for c in chunks[1:]] == [
            ("task_update", "plan-1", "in_progress"),
            ("task_update", "plan-2", "pending"),
        ]


async def test_approved_calls_without_a_proposed_plan_show_as_the_approved_plan(redis) -> None:
    model = ScriptedModel(
        [turn(call("post_update", channel="CGEN")), reply("Posted.")], latency=0.6
    )
    async with slack_bot(redis, model) as s:
        session = fs.message_ts()
        await s.event(fs.dm_event("UANA", "post the update", thread_ts=session))
        answer = await pressed(s, "DANA", session)
        assert answer.text == "Posted." and answer.plan == "Approved plan"
        assert answer.tasks == {"plan-1": ("Post to #CGEN", "complete")}


async def test_a_rejected_plan_is_not_shown_as_one(redis) -> None:
    model = ScriptedModel(
        [turn(call("propose_plan", goal="Announce", steps=PLAN)), reply("Fine, I won't.")],
        latency=0.6,
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "announce it")
        await s.event(asked)
        answer = await pressed(s, "CGEN", asked["ts"], "Reject")
        assert answer.text == "Fine, I won't." and answer.plan is None and answer.tasks == {}


async def test_a_refused_plan_update_still_delivers_the_answer_once(redis) -> None:
    model = ScriptedModel(
        [turn(call("post_update", channel="CGEN")), reply("Posted.")], latency=0.6
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "post the update")
        await s.event(asked)  # a plan to approve first: no answer stream yet
        await until(lambda: bool(s.fake.in_channel("CGEN", asked["ts"])), within=10)
        s.fake.refuse_stream("chat.startStream", "invalid_chunks")  # the plan, on its way
        await pressed(s, "CGEN", asked["ts"])
        posts = s.fake.in_channel("CGEN", asked["ts"])
        assert [p.text for p in posts[1:]] == ["Posted."]  # once, whole
        _, tried = s.fake.method_calls("chat.startStream")  # the approved plan, refused
        assert tried.body["chunks"][0]["type"] == "plan_update"
        assert not posts[-1].streaming


async def test_the_assistant_surface_streams_no_task_updates(redis) -> None:
    model = ScriptedModel(
        [turn(call("calculator", expression="6*7")), reply("It is 42.")], latency=0.6
    )
    async with slack_bot(redis, model, surface="assistant") as s:
        session = fs.message_ts()
        await s.event(fs.dm_event("UANA", "what is six times seven?", thread_ts=session))
        await until(lambda: bool(s.fake.in_channel("DANA", session)), within=10)
        await s.harness.settle()
        (answer,) = s.fake.in_channel("DANA", session)
        assert answer.text == "It is 42." and answer.tasks == {}


# --- a proposed plan, before approval: the prompt is a plan stream ----------------------------


async def proposed(s: Slack, channel: str, thread: str) -> fs.Post:
    """The one approval prompt in the thread, once it is there."""
    await until(lambda: bool(s.fake.in_channel(channel, thread)), within=10)
    await s.harness.settle()
    (prompt,) = s.fake.in_channel(channel, thread)
    return prompt


def plan_model(*after: object) -> ScriptedModel:
    steps = turn(call("propose_plan", goal="Announce the offsite", steps=PLAN))
    return ScriptedModel([steps, *after], latency=0.1)  # type: ignore[list-item]


async def test_a_proposed_plan_is_shown_as_a_plan_with_the_exact_calls_and_buttons(redis) -> None:
    model = plan_model(
        turn(call("post_update", channel="CGEN"), call("post_update", channel="CRANDOM")),
        reply("Both announced."),
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "announce the offsite everywhere")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        # one streamed message in plan display: the plan, each step pending, named by its tool
        assert prompt.display == "plan" and not prompt.streaming
        assert prompt.plan == "Proposed plan: Announce the offsite"
        assert prompt.tasks == {
            "proposed-1": ("post_update", "pending"),
            "proposed-2": ("post_update", "pending"),
        }
        (start,) = s.fake.method_calls("chat.startStream")
        assert (start.body["recipient_user_id"], start.body["recipient_team_id"]) == ("UANA", "T1")
        details = [c.get("details") for c in start.body["chunks"][1:]]
        assert details == [
            "described as: Announce in #general",
            "described as: Announce in #random",
        ]
        # below it, the prompt as it always was: what exactly runs, and the buttons
        assert "I'd like to do these steps" in prompt.body
        assert '"CGEN"' in prompt.body and '"CRANDOM"' in prompt.body
        assert [b["text"]["text"] for b in prompt.buttons] == ["Approve", "Reject"]
        assert not s.fake.method_calls("chat.postMessage")  # the prompt came once
        # the session waits for the decision (the stop says so; Slack's default is "active")
        assert s.fake.sessions[("CGEN", asked["ts"])].statuses[-1] == "suspended"

        answer = await pressed(s, "CGEN", asked["ts"])
        assert answer.text == "Both announced." and answer.plan == "Announce the offsite"
        assert set(answer.tasks.values()) == {
            ("Announce in #general", "complete"),
            ("Announce in #random", "complete"),
        }
        # the prompt says who approved; its buttons and its pending steps are gone
        decided = s.fake.in_channel("CGEN", asked["ts"])[0]
        assert decided.ts == prompt.ts and decided.edits == 1
        assert "✅ Approved by <@UANA>" in decided.body
        assert decided.buttons == [] and decided.tasks == {} and decided.plan is None


async def test_a_rejected_plan_says_so_and_shows_no_step_as_still_to_run(redis) -> None:
    async with slack_bot(redis, plan_model(reply("Fine, I won't."))) as s:
        asked = fs.mention_event("UANA", "announce it")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        assert prompt.plan is not None and len(prompt.tasks) == 2
        answer = await pressed(s, "CGEN", asked["ts"], "Reject")
        assert answer.text == "Fine, I won't." and answer.plan is None
        decided = s.fake.in_channel("CGEN", asked["ts"])[0]
        assert "❌ Rejected by <@UANA>" in decided.body
        assert decided.tasks == {} and decided.plan is None and decided.buttons == []


async def test_someone_elses_press_on_a_plan_is_refused_and_nothing_runs(redis) -> None:
    RAN.clear()
    model = ScriptedModel([turn(call("post_update", channel="CGEN")), reply("Posted.")])
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "post the update")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        assert prompt.plan == "Proposed plan" and prompt.buttons
        await s.form(fs.block_action(prompt, "Approve", user="UMAL"))
        await asyncio.sleep(0.5)
        await s.harness.settle()
        assert RAN == [] and len(model.turn_requests) == 1
        assert s.fake.in_channel("CGEN", asked["ts"])[0].buttons  # still waiting for Ana


async def test_a_refused_plan_stream_posts_the_prompt_once_with_its_buttons(redis) -> None:
    model = plan_model(
        turn(call("post_update", channel="CGEN"), call("post_update", channel="CRANDOM")),
        reply("Both announced."),
    )
    async with slack_bot(redis, model) as s:
        s.fake.refuse_stream("chat.startStream", "not_allowed_token_type")
        asked = fs.mention_event("UANA", "announce the offsite everywhere")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        assert prompt.display is None and prompt.tasks == {}  # the ordinary prompt
        assert [b["text"]["text"] for b in prompt.buttons] == ["Approve", "Reject"]
        assert len(s.fake.method_calls("chat.postMessage")) == 1
        answer = await pressed(s, "CGEN", asked["ts"])
        assert answer.text == "Both announced."


async def test_a_refused_end_of_the_plan_stream_still_leaves_one_prompt_with_buttons(
    redis,
) -> None:
    async with slack_bot(redis, plan_model(reply("Fine, I won't."))) as s:
        s.fake.refuse_stream("chat.stopStream", "ratelimited")
        asked = fs.mention_event("UANA", "announce it")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        # replaced by chat.update: the prompt's text and buttons, in the one message
        assert [b["text"]["text"] for b in prompt.buttons] == ["Approve", "Reject"]
        assert "I'd like to do these steps" in prompt.body
        assert not s.fake.method_calls("chat.postMessage")
        answer = await pressed(s, "CGEN", asked["ts"], "Reject")
        assert answer.text == "Fine, I won't."


async def test_a_plan_whose_update_is_refused_too_is_taken_back_and_posted_once(redis) -> None:
    async with slack_bot(redis, plan_model(reply("Fine, I won't."))) as s:
        s.fake.refuse_stream("chat.stopStream", "ratelimited")
        s.fake.answer_error("chat.update", "cant_update_message")
        asked = fs.mention_event("UANA", "announce it")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        assert prompt.display is None and prompt.buttons  # the ordinary prompt, alone
        assert [p.plan for p in s.fake.deleted] == ["Proposed plan: Announce the offsite"]


async def test_a_plan_in_a_direct_message_without_a_thread_is_the_ordinary_prompt(redis) -> None:
    async with slack_bot(redis, plan_model(reply("Fine, I won't."))) as s:
        await s.event(fs.dm_event("UANA", "announce it"))
        await until(lambda: bool(s.fake.in_channel("DANA")), within=10)
        await s.harness.settle()
        (prompt,) = s.fake.in_channel("DANA")
        assert prompt.thread_ts is None and prompt.buttons  # where it was asked, not a thread
        assert not s.fake.method_calls("chat.startStream")


async def test_the_models_words_in_a_drawn_plan_cannot_ping_anyone(redis) -> None:
    steps = [{"tool": "post_update", "args": {"channel": "CGEN"}, "description": "<!channel> go"}]
    model = ScriptedModel(
        [turn(call("propose_plan", goal="Ping <@UBOSS> now", steps=steps)), reply("ok")],
    )
    async with slack_bot(redis, model) as s:
        asked = fs.mention_event("UANA", "announce it")
        await s.event(asked)
        await proposed(s, "CGEN", asked["ts"])
        (start,) = s.fake.method_calls("chat.startStream")
        drawn = json.dumps(start.body["chunks"], ensure_ascii=False)
        assert "<!channel>" not in drawn and "<@UBOSS>" not in drawn


async def test_slack_failing_while_the_plan_is_drawn_and_back_gives_one_prompt(redis) -> None:
    async with slack_bot(redis, plan_model(reply("Fine, I won't."))) as s:
        # Slack's trouble: the stream and the plain prompt both fail once, then it is back
        s.fake.answer_error("chat.startStream", "internal_error", status=500)
        s.fake.answer_error("chat.postMessage", "internal_error", status=500)
        asked = fs.mention_event("UANA", "announce it")
        await s.event(asked)
        prompt = await proposed(s, "CGEN", asked["ts"])
        assert prompt.plan == "Proposed plan: Announce the offsite" and not prompt.streaming
        assert [b["text"]["text"] for b in prompt.buttons] == ["Approve", "Reject"]
        assert len(s.fake.method_calls("chat.startStream")) == 2  # tried again, whole
        answer = await pressed(s, "CGEN", asked["ts"], "Reject")
        assert answer.text == "Fine, I won't."
        assert "❌ Rejected by <@UANA>" in s.fake.in_channel("CGEN", asked["ts"])[0].body
