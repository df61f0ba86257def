from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from bot.config import Settings
from bot.runtime.inbox import decode
from bot.runtime.keys import PATTERNS
from bot.runtime.locks import ConversationLocks
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import email_tool, prompted, running, settings, with_approvers
from tests.bot.recording import RecordingAdapter, click, dm, message


async def test_a_message_gets_exactly_one_reply_in_its_conversation(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("Hello Ana!")])
    async with running(redis, model) as harness:
        ana, bob = dm("42"), dm("7")
        await harness.handle(message(ana, "hi"))
        assert harness.adapter.texts(ana) == ["Hello Ana!"]
        assert harness.adapter.texts(bob) == []
        session = await harness.runtime.sessions.load(ana.id)
        assert session.status == "idle" and session.state is not None


async def test_a_repeated_platform_event_is_handled_once(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("once")])
    async with running(redis, model) as harness:
        event = message(dm(), "hi")
        assert await harness.submit(event)
        assert not await harness.submit(event)
        await harness.settle()
        assert harness.adapter.texts() == ["once"]


async def test_messages_of_one_conversation_run_one_at_a_time_in_order(
    redis: aioredis.Redis,
) -> None:
    seen: list[str] = []

    def answer(request):
        seen.append(request.messages[-1].text)
        return reply(f"re: {request.messages[-1].text}")

    model = ScriptedModel([answer] * 5, latency=0.02)
    async with running(redis, model) as harness:
        chat = dm()
        for index in range(5):
            await harness.submit(message(chat, f"m{index}"))
        await harness.settle()
        assert [text.split()[-1] for text in seen] == ["m0", "m1", "m2", "m3", "m4"]
        assert harness.adapter.texts(chat) == [f"re: m{i}" for i in range(5)]


async def test_conversation_history_carries_into_the_next_objective(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("Noted."), reply("You said pineapples.")])
    async with running(redis, model) as harness:
        chat = dm()
        await harness.handle(message(chat, "I like pineapples"))
        await harness.handle(message(chat, "what did I say?"))
        second = model.turn_requests[-1]
        assert "I like pineapples" in " ".join(m.text for m in second.messages)


async def test_a_question_is_answered_with_its_option_button(redis: aioredis.Redis) -> None:
    model = ScriptedModel(
        [
            turn(call("ask_user", question="Which size?", options=["Small", "Large"])),
            reply("Large it is."),
        ]
    )
    async with running(redis, model) as harness:
        chat = dm()
        question = await prompted(harness, chat, "order a pizza")
        assert question.message.text == "Which size?"
        assert [b.label for b in question.message.buttons] == ["Small", "Large"]
        assert (await harness.runtime.sessions.load(chat.id)).status == "awaiting_answer"

        await harness.handle(click(chat, question, "1"))
        assert harness.adapter.texts(chat)[-1] == "Large it is."
        assert question.current.buttons == () and "Large" in question.current.text
        assert harness.adapter.notices[-1][1:] == ("Large", False)
        tool_result = model.turn_requests[-1].messages[-1].tool_results[0]
        assert tool_result.content.endswith("Large") or "Large" in tool_result.content


async def test_a_typed_reply_answers_a_pending_question(redis: aioredis.Redis) -> None:
    model = ScriptedModel(
        [turn(call("ask_user", question="Which city?", options=[])), reply("Lisbon, got it.")]
    )
    async with running(redis, model) as harness:
        chat = dm()
        await harness.handle(message(chat, "weather please"))
        await harness.handle(message(chat, "Lisbon"))
        assert harness.adapter.texts(chat) == ["Which city?", "Lisbon, got it."]
        assert "Lisbon" in model.turn_requests[-1].messages[-1].tool_results[0].content


async def test_approval_runs_the_tool_once_after_approve(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])
    async with running(redis, model, tools=registry) as harness:
        chat = dm()
        approval = await prompted(harness, chat, "email Bo")
        assert "Send an email to bo@example.com" in approval.message.text
        assert [b.label for b in approval.message.buttons] == ["Approve", "Reject"]
        assert ran == []

        first = click(chat, approval, "approve")
        await harness.submit(first)
        await harness.submit(click(chat, approval, "approve"))  # a double click
        await harness.settle()
        assert ran == ["bo@example.com"]
        assert harness.adapter.texts(chat)[-1] == "Sent."
        assert "Approved by Ana" in approval.current.text and approval.current.buttons == ()
        toasts = [(text, alert) for _, text, alert in harness.adapter.notices]
        assert toasts[0] == ("Approved", False)
        assert toasts[1][1] is True and "already approved" in toasts[1][0]


async def test_rejection_feeds_the_refusal_back(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="x@example.com")), reply("OK, I won't.")])
    async with running(redis, model, tools=registry) as harness:
        chat = dm()
        approval = await prompted(harness, chat, "email x")
        await harness.handle(click(chat, approval, "reject"))
        assert ran == []
        assert "Rejected by Ana" in approval.current.text
        result = model.turn_requests[-1].messages[-1].tool_results[0]
        assert result.is_error


async def test_a_message_while_awaiting_approval_is_feedback(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="x@example.com")), reply("Changed course.")])
    async with running(redis, model, tools=registry) as harness:
        chat = dm()
        await harness.handle(message(chat, "email x"))
        await harness.handle(message(chat, "no, email y instead"))
        assert ran == []
        texts = harness.adapter.texts(chat)
        assert "won't go ahead" in texts[1] and texts[2] == "Changed course."
        result = model.turn_requests[-1].messages[-1].tool_results[0]
        assert "email y instead" in result.content


async def test_only_the_requester_or_an_approver_may_decide(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="team@example.com")), reply("Sent.")] * 2)
    group = dm("-100")
    config = with_approvers(settings(), "boss", "S-admins")
    async with running(redis, model, tools=registry, config=config) as harness:
        approval = await prompted(harness, group, "email the team", direct=False)

        await harness.handle(click(group, approval, "approve", user="mallory", name="Mallory"))
        assert ran == []
        assert approval.current.buttons  # unchanged
        assert harness.adapter.notices[-1][1:] == ("Only Ana can approve this.", True)

        await harness.handle(click(group, approval, "approve", user="carol", groups=("S-admins",)))
        assert ran == ["team@example.com"]


async def test_in_a_direct_chat_nobody_else_decides(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="a@example.com"))])
    config = with_approvers(settings(), "boss")
    async with running(redis, model, tools=registry, config=config) as harness:
        chat = dm()
        approval = await prompted(harness, chat, "email a")
        await harness.handle(click(chat, approval, "approve", user="boss", name="Boss"))
        assert ran == [] and harness.adapter.notices[-1][2] is True


async def test_an_expired_approval_explains_itself(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="a@example.com"))])
    async with running(
        redis, model, tools=registry, config=settings(PARLEY_DECISION_TTL=0.2)
    ) as harness:
        chat = dm()
        approval = await prompted(harness, chat, "email a")
        await asyncio.sleep(0.3)
        await harness.handle(click(chat, approval, "approve"))
        assert ran == []
        _, text, alert = harness.adapter.notices[-1]
        assert alert and "expired" in text
        assert "Expired" in approval.current.text and approval.current.buttons == ()
        assert (await harness.runtime.sessions.load(chat.id)).status == "idle"


async def test_a_click_on_an_unknown_decision_explains_itself(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("hi")])
    async with running(redis, model) as harness:
        chat = dm()
        posted = await prompted(harness, chat, "hi")
        from dataclasses import replace

        fake = replace(posted, message=replace(posted.message, decision_id="gone"))
        await harness.handle(click(chat, fake, "approve"))
        _, text, alert = harness.adapter.notices[-1]
        assert alert and "expired" in text


async def test_cancel_ends_a_pending_approval(redis: aioredis.Redis) -> None:
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="a@example.com"))])
    async with running(redis, model, tools=registry) as harness:
        chat = dm()
        approval = await prompted(harness, chat, "email a")
        await harness.handle(message(chat, "/cancel", command="cancel"))
        assert "Cancelled" in harness.adapter.texts(chat)[-1]
        assert "Cancelled by Ana" in approval.current.text
        await harness.handle(click(chat, approval, "approve"))
        assert ran == [] and harness.adapter.notices[-1][2] is True


async def test_an_over_long_message_is_refused_politely(redis: aioredis.Redis) -> None:
    model = ScriptedModel([])
    capped = Settings.load(env_file=None, agent={"PARLEY_MAX_MESSAGE_CHARS": "4000"})
    async with running(redis, model, config=capped) as harness:
        chat = dm()
        await harness.submit(message(chat, "x" * 5000))
        await harness.submit(message(chat, "y" * 40_001))  # past any platform's maximum
        await harness.settle()
        assert "too long" in harness.adapter.texts(chat)[0]
        assert model.requests == []
    async with running(redis, model) as harness:  # no cap set: the longest platform's
        chat = dm()
        await harness.handle(message(chat, "y" * 40_001))
        assert "my limit is 40,000" in harness.adapter.texts(chat)[-1]
        assert model.requests == []


async def test_a_replayed_entry_does_not_post_again(redis: aioredis.Redis) -> None:
    model = ScriptedModel([reply("only once"), reply("only once")])
    async with running(redis, model) as harness:
        chat = dm()
        await harness.handle(message(chat, "hi"))
        # As if the worker had died after posting but before storing its effects:
        session = await harness.runtime.sessions.load(chat.id)
        session.last_entry = None
        await redis.set(harness.runtime.keys.session(chat.id), session.model_dump_json())
        [(entry, fields)] = await redis.xrange(harness.runtime.keys.inbox)

        locks = ConversationLocks(redis, harness.runtime.keys, lease=5, ttl=60)
        held = await locks.try_acquire(chat.id)
        assert held is not None
        await harness.runtime.executor.handle(entry.decode(), decode(fields[b"event"]), held)
        await locks.release(held)
        assert len(model.turn_requests) == 2  # the run happened again...
        assert harness.adapter.texts(chat) == ["only once"]  # ...but posted nothing new


async def test_reminders_are_posted_once_into_their_conversation(redis: aioredis.Redis) -> None:
    model = ScriptedModel(
        [turn(call("create_reminder", text="stretch", in_seconds=1)), reply("I'll remind you.")]
    )
    # Two runtimes share one consumer group, so either may take the message;
    # they share the model script and the chat so the test sees both.
    shared = RecordingAdapter()
    async with (
        running(redis, model, adapter=shared) as harness,
        running(redis, model, adapter=shared),
    ):
        chat = dm()
        approval = await prompted(harness, chat, "remind me to stretch in a second")
        await harness.handle(click(chat, approval, "approve"))
        deadline = time.monotonic() + 5
        while not any("stretch" in t and "Reminder" in t for t in shared.texts(chat)):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        reminders = [t for t in shared.texts(chat) if "Reminder" in t]
        assert reminders == ["⏰ Reminder for Ana: stretch"]


async def test_entries_of_a_dead_worker_are_reclaimed(redis: aioredis.Redis) -> None:
    from bot.runtime.inbox import Inbox
    from bot.runtime.keys import Keys
    from bot.runtime.worker import GROUP

    keys = Keys()
    inbox = Inbox(redis, keys, dedup_ttl=60)
    await redis.xgroup_create(keys.inbox, GROUP, id="0", mkstream=True)
    chat = dm()
    await inbox.submit(message(chat, "are you there?"))
    # a worker that read the entry and died before handling it
    await redis.xreadgroup(GROUP, "dead-worker", {keys.inbox: ">"}, count=10)
    model = ScriptedModel([reply("Yes, here.")])
    async with running(redis, model) as harness:
        await harness.settle(within=10)
        assert harness.adapter.texts(chat) == ["Yes, here."]


async def test_every_key_is_bounded(redis: aioredis.Redis) -> None:
    registry, _ = email_tool()
    model = ScriptedModel(
        [
            reply("hello"),
            turn(call("ask_user", question="Sure?", options=["yes", "no"])),
            reply("fine"),
            turn(call("create_reminder", text="x", in_seconds=3600)),
            reply("scheduled"),
        ]
    )
    async with running(redis, model, tools=registry) as harness:
        chat = dm()
        await harness.handle(message(chat, "hi"))
        await harness.handle(message(chat, "ask me"))
        await harness.handle(click(chat, harness.adapter.in_conversation(chat)[-1], "0"))
        await harness.handle(message(chat, "remind me in an hour"))
        await harness.handle(click(chat, harness.adapter.in_conversation(chat)[-1], "approve"))
        await redis.xadd(harness.runtime.keys.inbox, {"event": b"not an event"})  # dead-lettered
        await harness.settle()

    import fnmatch

    prefix = "parley:"
    keys = [k.decode() async for k in redis.scan_iter("*")]
    assert keys, "a realistic run leaves keys"
    assert f"{prefix}deadletter" in keys
    for key in keys:
        assert key.startswith(prefix), key
        rest = key[len(prefix) :]
        rule = next(
            (r for pattern, r in PATTERNS.items() if fnmatch.fnmatchcase(rest, pattern)), None
        )
        assert rule is not None, f"{key} matches no known key pattern"
        if rule == "ttl":
            assert await redis.pttl(key) > 0, f"{key} should expire"
