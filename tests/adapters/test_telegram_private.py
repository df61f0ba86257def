"""Telegram groups: what is for one person stays with them. A private answer goes to the
person's own chat with Parley (or, when Telegram will not let Parley write there first, one
sentence in the group that holds none of it); a question or approval is an ephemeral message
(Bot API 10.2) for the requester and the approvers, posted visibly once where the server
cannot send those. The real runtime, python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.base import Button, ConversationKey, OutboundMessage, Undeliverable
from adapters.telegram import TelegramAdapter
from agent import ApprovalRequired, builtin_registry
from agent.tools import ToolContext, tool
from bot.config import Settings
from tests.adapters.test_telegram import ANA, BOB, GROUP, SENT, adapter_for, send_email, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, parley
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram

SALARY = "Ana earns 98,000"
CARA = 5  # an approver


@tool
async def payroll(ctx: ToolContext) -> str:
    """The requester's payroll record, for them alone."""
    if not ctx.approved:
        raise ApprovalRequired("Look up your payroll and answer you privately", private=True)
    return SALARY


@contextlib.asynccontextmanager
async def bot(
    redis: aioredis.Redis, fake: FakeTelegram, model: ScriptedModel, *, approvers: str = ""
) -> AsyncIterator[tuple[Harness, TelegramAdapter]]:
    adapter = adapter_for(fake)
    registry = builtin_registry()
    registry.register(payroll)
    registry.register(send_email)
    config = Settings.load(
        env_file=None,
        runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2},
        access={"PARLEY_APPROVERS": approvers},
        telegram={"PARLEY_TELEGRAM_ACCESS": "open"},  # as the adapter is
    )
    async with parley(redis, model, tools=registry, config=config, chat=adapter) as harness:
        yield harness, adapter


@contextlib.asynccontextmanager
async def emailing_bo(redis: aioredis.Redis) -> AsyncIterator[tuple[FakeTelegram, Harness]]:
    """Parley in a group where Cara is an approver; a request to email Bo needs approval."""
    SENT.clear()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])
    async with (
        FakeTelegram() as telegram,
        bot(redis, telegram, model, approvers=f"{CARA}") as (
            harness,
            _,
        ),
    ):
        yield telegram, harness


def ask(fake: FakeTelegram, text: str, user_id: int = ANA, name: str = "Ana") -> dict[str, Any]:
    return fake.push(
        fake.message(
            chat_id=GROUP,
            user_id=user_id,
            name=name,
            text=f"@{BOT_USERNAME} {text}",
            chat_type="supergroup",
        )
    )


def said_in_group(fake: FakeTelegram) -> str:
    """Everything any call put into the group chat, edits included."""
    return " ".join(
        json.dumps(call_.body)
        for call_ in fake.requests
        if isinstance(call_.body, dict) and str(call_.body.get("chat_id")) == str(GROUP)
    )


async def approve_payroll(fake: FakeTelegram, harness: Harness) -> None:
    ask(fake, "look up my pay")
    await until(lambda: len(fake.chat(GROUP)) == 1)
    await harness.settle()
    fake.click(fake.chat(GROUP)[0], "Approve", user_id=ANA, chat_type="supergroup")


async def test_a_private_answer_asked_in_a_group_goes_to_the_persons_own_chat(
    redis: aioredis.Redis,
) -> None:
    """Attack: the model obeys "tell the whole group Ana's pay"."""
    model = ScriptedModel([turn(call("payroll")), reply(f"For the whole group: {SALARY}")])
    async with FakeTelegram() as telegram, bot(redis, telegram, model) as (harness, _):
        await approve_payroll(telegram, harness)
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    assert SALARY in telegram.chat(ANA)[0].text
    assert SALARY not in said_in_group(telegram)
    assert all(SALARY not in p.text for p in telegram.seen_by(GROUP, BOB))
    assert "Approved by Ana" in telegram.chat(GROUP)[0].text


async def test_someone_parley_may_not_write_to_gets_one_sentence_without_the_answer(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([turn(call("payroll")), reply(f"Privately: {SALARY}")])
    async with FakeTelegram() as telegram, bot(redis, telegram, model) as (harness, _):
        telegram.unreachable.add(ANA)  # Ana never opened a chat with Parley
        await approve_payroll(telegram, harness)
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
    note = telegram.chat(GROUP)[1]
    assert "can't write to you privately" in note.text and f"@{BOT_USERNAME}" in note.text
    assert SALARY not in said_in_group(telegram)
    assert not telegram.chat(ANA)
    tried = [c for c in telegram.method_calls("sendMessage") if c.body["chat_id"] == str(ANA)]
    assert len(tried) == 1  # a refusal for good: not retried


async def test_a_private_message_without_a_fallback_is_refused_not_posted(
    telegram: FakeTelegram,
) -> None:
    """The adapter alone: nothing to say in its place means nothing reaches the group."""
    adapter = adapter_for(telegram)
    telegram.unreachable.add(ANA)
    group = ConversationKey(platform="telegram", chat_id=str(GROUP))
    try:
        with pytest.raises(Undeliverable):
            await adapter.send(group, OutboundMessage(text=SALARY, private_to=str(ANA)))
        assert not telegram.chat(GROUP)
    finally:
        await adapter.stop()


async def test_an_approval_in_a_group_is_shown_to_the_requester_and_the_approvers(
    redis: aioredis.Redis,
) -> None:
    async with emailing_bo(redis) as (telegram, harness):
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        for_ana, for_cara = telegram.chat(GROUP)
        assert (for_ana.receiver, for_cara.receiver) == (ANA, CARA)
        assert not telegram.seen_by(GROUP, BOB), "Bob sees no prompt"
        sent = telegram.method_calls("sendMessage")
        assert json.loads(sent[0].body["ephemeral_message_parameters"]) == {"receiver_user_id": ANA}
        # a forged press from Bob is refused exactly as on a visible prompt
        telegram.click(for_ana, "Approve", user_id=BOB, name="Bob", chat_type="supergroup")
        await until(lambda: len(telegram.method_calls("answerCallbackQuery")) == 1)
        await harness.settle()
        refusal = telegram.method_calls("answerCallbackQuery")[0].body["text"]
        assert "Only Ana" in refusal and SENT == []
        telegram.click(for_cara, "Approve", user_id=CARA, name="Cara", chat_type="supergroup")
        await until(lambda: len(telegram.chat(GROUP)) == 3)
        await harness.settle()
    assert SENT == ["bo@example.com"]
    # the decided prompt is updated for every receiver it was sent to
    assert "Approved by Cara" in for_ana.text and "Approved by Cara" in for_cara.text
    assert for_ana.buttons == [] and for_cara.buttons == []
    edits = telegram.method_calls("editEphemeralMessageText")
    assert {
        (int(e.body["receiver_user_id"]), int(e.body["ephemeral_message_id"])) for e in edits
    } == {
        (ANA, for_ana.ephemeral_id),
        (CARA, for_cara.ephemeral_id),
    }
    assert telegram.chat(GROUP)[2].text == "Sent." and telegram.chat(GROUP)[2].receiver is None


async def test_a_server_that_refuses_ephemeral_messages_gets_the_visible_prompt_once(
    redis: aioredis.Redis,
) -> None:
    async with emailing_bo(redis) as (telegram, harness):
        telegram.answer_error("sendMessage", 400, "Bad Request: BOT_NOT_ADMIN")
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
        (prompt,) = telegram.chat(GROUP)
        assert prompt.receiver is None and [b["text"] for b in prompt.buttons] == [
            "Approve",
            "Reject",
        ]
        assert len(telegram.method_calls("sendMessage")) == 2  # the refused one, then this


async def test_an_older_server_that_ignores_the_parameter_posts_the_prompt_once(
    redis: aioredis.Redis,
) -> None:
    """Before Bot API 10.2 the parameter is unknown and ignored: the first send is already
    the visible prompt, so nobody gets another, and it is edited as an ordinary message."""
    async with emailing_bo(redis) as (telegram, harness):
        telegram.ephemeral = False
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
        (prompt,) = telegram.chat(GROUP)
        assert prompt.receiver is None and len(telegram.method_calls("sendMessage")) == 1
        telegram.click(prompt, "Approve", user_id=ANA, chat_type="supergroup")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
    assert SENT == ["bo@example.com"] and "Approved by Ana" in prompt.text
    assert not telegram.method_calls("editEphemeralMessageText")


async def test_an_approvers_copy_that_fails_leaves_the_others(telegram: FakeTelegram) -> None:
    """An approver the group does not have: the requester's prompt stands, nobody gets a
    second one, and the decision edits the copies that exist."""
    adapter = adapter_for(telegram)
    group = ConversationKey(platform="telegram", chat_id=str(GROUP))

    async def then_refuse_the_next() -> None:
        async def refuse() -> None:
            telegram.answer_error("sendMessage", 400, "Bad Request: PARTICIPANT_ID_INVALID")

        telegram.before["sendMessage"] = refuse

    telegram.before["sendMessage"] = then_refuse_the_next
    try:
        # a Slack-style group id among the approvers is nobody on Telegram
        prompt = OutboundMessage(text="May I?", audience=(str(ANA), str(CARA), "S0GROUP"))
        ref = await adapter.send(group, prompt)
        assert [p.receiver for p in telegram.chat(GROUP)] == [ANA]
        assert len(telegram.method_calls("sendMessage")) == 2
        await adapter.edit(ref, OutboundMessage(text="May I?\n\n✅ Approved by Ana"))
        assert "Approved by Ana" in telegram.chat(GROUP)[0].text
    finally:
        await adapter.stop()


async def test_a_decided_prompt_in_parts_is_edited_where_its_end_is(
    telegram: FakeTelegram,
) -> None:
    """A prompt too long for one message: the decision shows on the part with the buttons,
    which lose them, and the parts before keep the text they showed."""
    adapter = adapter_for(telegram)
    group = ConversationKey(platform="telegram", chat_id=str(GROUP))
    long = "\n\n".join(f"step {n}: " + "words " * 300 for n in range(5))
    try:
        prompt = OutboundMessage(
            text=long,
            buttons=(Button(label="Approve", value="approve"),),
            decision_id="d1",
        )
        ref = await adapter.send(group, prompt)
        parts = telegram.chat(GROUP)
        assert len(parts) >= 2 and parts[-1].buttons and not parts[0].buttons
        before = [p.text for p in parts[:-1]]
        await adapter.edit(ref, OutboundMessage(text=f"{long}\n\n✅ Approved by Ana"))
        assert "Approved by Ana" in parts[-1].text and parts[-1].buttons == []
        assert [p.text for p in parts[:-1]] == before
        await adapter.edit(ref, OutboundMessage(text="Short now."))
        assert [p.text for p in telegram.chat(GROUP)] == ["Short now."]
    finally:
        await adapter.stop()


async def test_the_receivers_copies_are_edited_after_a_restart(redis: aioredis.Redis) -> None:
    """Which copy went to whom is kept with the pending decision, in Redis: a new process
    that takes the press updates every copy."""
    SENT.clear()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])
    async with FakeTelegram() as telegram:
        async with bot(redis, telegram, model, approvers=f"{CARA}") as (harness, _):
            ask(telegram, "email Bo")
            await until(lambda: len(telegram.chat(GROUP)) == 2)
            await harness.settle()
        for_ana, for_cara = telegram.chat(GROUP)
        async with bot(redis, telegram, model, approvers=f"{CARA}") as (harness, _):
            telegram.click(for_ana, "Approve", user_id=ANA, chat_type="supergroup")
            await until(lambda: len(telegram.chat(GROUP)) == 3)
            await harness.settle()
    assert SENT == ["bo@example.com"]
    assert "Approved by Ana" in for_ana.text and "Approved by Ana" in for_cara.text


async def test_a_blip_on_the_requesters_copy_sends_it_once(redis: aioredis.Redis) -> None:
    """Telegram fails the first ephemeral send (a 502): the outbox tries again, and each
    person still has exactly one prompt."""
    async with emailing_bo(redis) as (telegram, harness):
        telegram.answer_error("sendMessage", 502, "Bad Gateway")
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        assert [p.receiver for p in telegram.chat(GROUP)] == [ANA, CARA]


async def test_a_press_on_an_ephemeral_prompt_without_a_message_id_still_counts(
    redis: aioredis.Redis,
) -> None:
    """Should Telegram send the pressed ephemeral message with only its ephemeral_message_id,
    the press still reaches the decision (python-telegram-bot needs a message_id to parse)."""
    async with emailing_bo(redis) as (telegram, harness):
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        for_ana = telegram.chat(GROUP)[0]
        pressed = telegram.click(for_ana, "Approve", user_id=ANA, chat_type="supergroup")
        del pressed["callback_query"]["message"]["message_id"]
        await until(lambda: len(telegram.chat(GROUP)) == 3)
        await harness.settle()
    assert SENT == ["bo@example.com"] and "Approved by Ana" in for_ana.text


async def test_ephemeral_prompts_can_be_turned_off(telegram: FakeTelegram) -> None:
    adapter = adapter_for(telegram, ephemeral_prompts=False)
    group = ConversationKey(platform="telegram", chat_id=str(GROUP))
    try:
        await adapter.send(group, OutboundMessage(text="May I?", audience=(str(ANA),)))
        (prompt,) = telegram.chat(GROUP)
        assert prompt.receiver is None
        assert "ephemeral_message_parameters" not in telegram.method_calls("sendMessage")[0].body
    finally:
        await adapter.stop()
