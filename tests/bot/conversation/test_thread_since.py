"""A Slack thread Parley follows: mentioned again, it reads the messages it was not sent since
the last one it saw (conversations.replies with `oldest`), across a restart of the runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from adapters.base import Actor, ConversationKey, InboundMessage
from bot.config import Settings
from bot.conversation.attachments import SINCE_HEADER, THREAD_HEADER, Gatherer, ThreadMarks
from bot.runtime.keys import Keys
from tests.adapters.test_slack import Slack, on_events
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until
from tests.private_redis import private_redis


def settings() -> Settings:
    return Settings.load(env_file=None, runtime={"PARLEY_RECLAIM_IDLE": 0.5})


def at(root: str, micros: int) -> str:
    seconds, _, base = root.partition(".")
    return f"{seconds}.{int(base) + micros:06d}"


def written(fake: FakeSlack, root: str, ts: str, user: str, text: str) -> None:
    """A message that is in the thread on Slack, whether or not Parley is sent it."""
    message = {"type": "message", "user": user, "text": text, "ts": ts, "thread_ts": root}
    fake.threads.setdefault(("CGEN", root), []).append(message)


async def said(slack: Slack, count: int) -> None:
    await until(lambda: len(slack.fake.in_channel("CGEN")) >= count)
    await slack.harness.settle()


def thread_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[")]


async def test_a_mention_in_a_followed_thread_reads_what_it_missed_across_a_restart(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([reply("Friday is tight."), reply("Notes are drafted."), reply("Tue.")])
    async with FakeSlack() as fake:
        fake.users.update({"UANA": "Ana", "UBOB": "Bob", "UCAT": "Cat"})
        root = fs.message_ts()
        fake.thread("CGEN", root, ("UANA", "Shall we ship on Friday?"))
        first = fs.mention_event("UANA", "what do you think?", thread_ts=root, ts=at(root, 10))
        plain = fs.channel_message("UBOB", "and the notes?", thread_ts=root, ts=at(root, 20))
        async with on_events(redis, model, fake, config=settings()) as slack:
            written(fake, root, first["ts"], "UANA", first["text"])
            await slack.event(first)
            await said(slack, 1)
            written(fake, root, plain["ts"], "UBOB", plain["text"])
            await slack.event(plain)  # a plain reply in a thread Parley now follows
            await said(slack, 2)
        # Parley is away; two people write without mentioning it: nobody sends it these.
        written(fake, root, at(root, 30), "UCAT", "I'd rather ship on Tuesday")
        written(fake, root, at(root, 31), "UBOB", "Tuesday works for QA")
        again = fs.mention_event("UANA", "so, what now?", thread_ts=root, ts=at(root, 40))
        written(fake, root, again["ts"], "UANA", again["text"])
        async with on_events(redis, model, fake, config=settings()) as slack:
            await slack.event(again)
            await said(slack, 3)

    opening, plain_turn, mention_turn = (r.messages[-1].text for r in model.turn_requests)
    assert THREAD_HEADER.format(count=1) in opening
    assert thread_lines(opening) == ["[Ana]: Shall we ship on Friday?"]
    assert thread_lines(plain_turn) == [] and plain_turn == "and the notes?"
    # exactly the two messages it was not sent: not the thread before, not its own answers
    assert SINCE_HEADER.format(count=2) in mention_turn
    assert thread_lines(mention_turn) == [
        "[Cat]: I'd rather ship on Tuesday",
        "[Bob]: Tuesday works for QA",
    ]
    assert mention_turn.endswith("so, what now?") and mention_turn.count("so, what now?") == 1
    replies = fake.method_calls("conversations.replies")
    assert [r.body.get("oldest") for r in replies] == [None, plain["ts"]]
    assert all(r.body["ts"] == root for r in replies)
    assert [p.thread_ts for p in fake.in_channel("CGEN")] == [root] * 3


async def test_the_mark_is_bounded_and_a_replay_reads_the_same_messages(
    redis: aioredis.Redis,
) -> None:
    keys = Keys()
    marks = ThreadMarks(redis, keys, ttl=60)
    assert await marks.see("slack:T1:C1:1.0", "1.000001") is None
    assert await marks.see("slack:T1:C1:1.0", "1.000005") == "1.000001"
    assert await marks.see("slack:T1:C1:1.0", "1.000005") == "1.000001"  # the same entry again
    assert await marks.see("slack:T1:C1:1.0", "1.000009") == "1.000005"
    ttl = await redis.pttl(keys.thread_seen("slack:T1:C1:1.0"))
    assert 0 < ttl <= 60_000


async def test_a_followed_direct_thread_is_not_read_again(redis: aioredis.Redis) -> None:
    # In a direct conversation every message reaches Parley: nothing to catch up on.
    model = ScriptedModel([reply("Hello."), reply("Sure."), reply("Done.")])
    async with FakeSlack() as fake:
        root = fs.message_ts()
        async with on_events(redis, model, fake, config=settings()) as slack:
            for n, text in enumerate(("hi", "one more", "and another"), start=1):
                await slack.event(fs.dm_event("UANA", text, thread_ts=root, ts=at(root, 10 * n)))
                await until(lambda n=n: len(fake.in_channel("DANA")) >= n)
                await slack.harness.settle()
    assert [p.text for p in fake.in_channel("DANA")] == ["Hello.", "Sure.", "Done."]
    # the first message, in a thread Parley did not follow yet, is the only look back
    assert len(fake.method_calls("conversations.replies")) <= 1


async def test_an_answer_to_a_question_counts_as_seen(redis: aioredis.Redis) -> None:
    model = ScriptedModel(
        [
            turn(call("ask_user", question="Which day?", options=[])),
            reply("Tuesday it is."),
            reply("Noted."),
        ]
    )
    async with FakeSlack() as fake:
        fake.users.update({"UANA": "Ana", "UBOB": "Bob", "UCAT": "Cat"})
        root = fs.message_ts()
        fake.thread("CGEN", root, ("UANA", "Let's plan the release"))
        first = fs.mention_event("UANA", "pick a day?", thread_ts=root, ts=at(root, 10))
        answer = fs.channel_message("UANA", "Tuesday", thread_ts=root, ts=at(root, 20))
        again = fs.mention_event("UANA", "anything new?", thread_ts=root, ts=at(root, 40))
        async with on_events(redis, model, fake, config=settings()) as slack:
            written(fake, root, first["ts"], "UANA", first["text"])
            await slack.event(first)
            await said(slack, 1)  # the question
            written(fake, root, answer["ts"], "UANA", answer["text"])
            await slack.event(answer)  # a plain reply answering it
            await said(slack, 2)
            written(fake, root, at(root, 30), "UCAT", "QA is ready")
            written(fake, root, again["ts"], "UANA", again["text"])
            await slack.event(again)
            await said(slack, 3)

    mention_turn = model.turn_requests[-1].messages[-1].text
    # only what Parley was not sent; the answer it read is not repeated as missed
    assert thread_lines(mention_turn) == ["[Cat]: QA is ready"]
    replies = fake.method_calls("conversations.replies")
    assert [r.body.get("oldest") for r in replies] == [None, answer["ts"]]


class NoThread:
    """A conversation source whose threads hold nothing more."""

    async def download(self, attachment: object, limit: int) -> bytes:
        raise AssertionError("no files here")

    async def thread_history(
        self, conversation: ConversationKey, before: str, after: str | None = None
    ) -> list[object]:
        return []


@pytest.mark.network
async def test_a_mark_redis_could_not_take_fails_the_gathering_and_the_retry_keeps_it(
    tmp_path: Path,
) -> None:
    # Redis away while the mark is written: the error escapes (so the worker retries the
    # entry, instead of a run that lost its place in the thread); once back, the retry marks.
    async with private_redis(tmp_path / "redis") as server:
        client = server.client()
        try:
            marks = ThreadMarks(client, Keys(), ttl=60)
            gatherer = Gatherer(marks=marks)
            conversation = ConversationKey(
                platform="slack", chat_id="CGEN", thread_id="1.000000", team_id="T1"
            )
            event = InboundMessage(
                event_id="slack:Ev1",
                conversation=conversation,
                actor=Actor(platform="slack", user_id="UANA", team_id="T1"),
                text="so?",
                is_direct=False,
                message_id="1.000040",
            )
            await server.down()
            with pytest.raises(RedisConnectionError):
                await gatherer.gather(event, NoThread(), following=True)
            await server.up()
            await gatherer.gather(event, NoThread(), following=True)  # no mark before: no read
            assert await marks.see(conversation.id, "1.000050") == "1.000040"
        finally:
            await client.aclose()
