"""Slack thread history and files: conversations.replies, users.info and url_private downloads
from a fake Web API, through the real slack-sdk, on the real runtime with a scripted model."""

from __future__ import annotations

import base64
import time

import pytest

from adapters.base import Actor, Attachment, ConversationKey, DownloadError, InboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from adapters.slack import context as slack_context
from adapters.slack.context import download, may_receive_token
from agent import Agent, Finished, builtin_registry
from agent.channels import read_channel_tool
from agent.protocols import RunContext
from bot.conversation.attachments import Gatherer
from bot.conversation.channels import Channels
from tests.adapters.samples import pdf, png
from tests.adapters.test_slack import slack_bot
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.helpers import until


async def test_a_mid_thread_mention_sees_the_thread_before_it(redis) -> None:
    model = ScriptedModel([reply("You decided on Monday."), reply("Noted.")])
    async with slack_bot(redis, model) as s:
        s.fake.users.update({"UANA": "Ana", "UBOB": "Bob"})
        root = fs.message_ts()
        s.fake.thread(
            "CGEN",
            root,
            ("UANA", "Shall we ship on Friday?"),
            ("UBOT", "I can draft the release notes."),
            ("UBOB", "No, Monday — <@UANA> QA needs time"),
            ("UANA", "OK, Monday it is"),
        )
        later = f"{root.partition('.')[0]}.{int(root.partition('.')[2]) + 10:06d}"
        mention = fs.mention_event("UANA", "what did we decide?", thread_ts=root, ts=later)
        s.fake.thread("CGEN", later, ("UANA", mention["text"]))  # Slack lists the mention too
        await s.event(mention)
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        # the thread is now followed: a plain reply needs no second look at the history
        await s.event(fs.channel_message("UBOB", "and the notes?", thread_ts=root))
        await until(lambda: len(s.fake.in_channel("CGEN")) == 2)
        await s.harness.settle()

    assert [p.thread_ts for p in s.fake.in_channel("CGEN")] == [root, root]
    first = model.turn_requests[0].messages[-1].text
    lines = [line for line in first.splitlines() if line.startswith("[")]
    assert lines == [
        "[Ana]: Shall we ship on Friday?",
        "[you (Parley)]: I can draft the release notes.",
        "[Bob]: No, Monday — @Ana QA needs time",
        "[Ana]: OK, Monday it is",
    ]
    assert first.endswith("what did we decide?") and first.count("what did we decide?") == 1
    replies = s.fake.method_calls("conversations.replies")
    assert len(replies) == 1 and replies[0].body["ts"] == root
    assert len(s.fake.method_calls("users.info")) == 2  # Ana once, Bob once: cached
    assert "Shall we ship" not in model.turn_requests[1].messages[-1].text


async def test_thread_context_keeps_the_newest_within_its_budget(redis) -> None:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(
            config=SlackConfig(bot_token=fake.bot_token, signing_secret="s", api_url=fake.api_url)
        )
        await adapter.initialize()
        fake.page_size = 3  # several pages of history
        root = fs.message_ts()
        fake.thread(
            "CGEN", root, *[("UANA", f"message number {n:02d} " + "x" * 60) for n in range(10)]
        )
        here = f"{root.partition('.')[0]}.{int(root.partition('.')[2]) + 50:06d}"
        event = InboundMessage(
            event_id="slack:Ev1",
            conversation=ConversationKey(
                platform="slack", chat_id="CGEN", thread_id=root, team_id="T1"
            ),
            actor=Actor(platform="slack", user_id="UANA"),
            text="summarise this",
            is_direct=False,
            message_id=here,
        )
        gathered = await Gatherer(thread_tokens=50).gather(event, adapter, following=False)
        await adapter.stop()
    context = gathered.blocks[0].text  # type: ignore[union-attr]
    assert "message number 09" in context and "message number 08" in context
    assert "message number 07" not in context and "8 older ones left out" in context
    assert context.index("number 08") < context.index("number 09")  # oldest first
    assert len(fake.method_calls("conversations.replies")) == 4
    assert fake.method_calls("users.info")  # asked, though Ana has no name here: the id stands


async def test_a_slack_image_reaches_the_model_with_the_bot_token(redis) -> None:
    picture = png(300, 200, (250, 200, 0))
    model = ScriptedModel([reply("A yellow banner.")])
    async with slack_bot(redis, model) as s:
        file = s.fake.add_file(picture, "banner.png", "image/png")
        await s.event(fs.dm_event("UANA", "", files=[file], subtype="file_share"))
        await until(lambda: bool(s.fake.in_channel("DANA")))
        await s.harness.settle()
    [image] = model.turn_requests[0].messages[-1].images
    assert base64.b64decode(image.data) == picture and image.name == "banner.png"
    assert "banner.png with no message" in model.turn_requests[0].messages[-1].text
    [fetched] = [r for r in s.fake.requests if r.path.startswith("/files-pri/")]
    assert fetched.headers["Authorization"] == "Bearer xoxb-test-token"


async def test_slack_text_and_pdf_files_with_a_comment(redis) -> None:
    model = ScriptedModel([reply("Two items.")])
    async with slack_bot(redis, model) as s:
        files = [
            s.fake.add_file(b"- milk\n- eggs\n", "list.md", "text/plain"),
            s.fake.add_file(pdf("Invoice total: 310 EUR"), "invoice.pdf", "application/pdf"),
        ]
        await s.event(fs.mention_event("UANA", "check these", files=files))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
    text = model.turn_requests[0].messages[-1].text
    assert "- milk\n- eggs" in text and "Invoice total: 310 EUR" in text
    assert text.endswith("check these")


async def test_a_download_slack_refuses_is_one_sentence_and_nothing_breaks(redis) -> None:
    model = ScriptedModel([reply("Fine.")])
    async with slack_bot(redis, model) as s:
        file = s.fake.add_file(png(), "chart.png", "image/png")
        s.fake.bot_token = "xoxb-another"  # our token lacks files:read: Slack's sign-in page
        await s.event(fs.dm_event("UANA", "", files=[file], subtype="file_share"))
        big = {**s.fake.add_file(b"x", "huge.csv", "text/csv"), "size": 25 * 1024 * 1024}
        await s.event(fs.dm_event("UANA", "", files=[big], subtype="file_share"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2)
        await s.event(fs.dm_event("UANA", "still there?"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 3)
        await s.harness.settle()
    texts = [p.body for p in s.fake.in_channel("DANA")]
    assert texts[0] == "I couldn't download chart.png; please try sending it again."
    assert texts[1] == "huge.csv is too large for me (25.0 MB; the limit is 20 MB)."
    assert texts[2] == "Fine."
    assert len(model.turn_requests) == 1


async def test_the_bot_token_only_goes_to_slack_hosts() -> None:
    api = "http://127.0.0.1:5555/api/"
    assert may_receive_token("https://files.slack.com/files-pri/T1-F1/a.png", api)
    assert may_receive_token("http://127.0.0.1:5555/files-pri/T1-F1/a.png", api)
    assert not may_receive_token("https://files.slack.com.evil.example/a.png", api)
    assert not may_receive_token("http://files.slack.com/a.png", api)  # never in clear text
    assert not may_receive_token("https://evil.example/files-pri/a.png", api)
    assert not may_receive_token("http://127.0.0.1:6666/files-pri/a.png", api)  # another port
    # with Slack's own API, the API host gets the token only over HTTPS too
    slack = "https://slack.com/api/"
    assert may_receive_token("https://slack.com/files-pri/T1-F1/a.png", slack)
    assert not may_receive_token("http://slack.com/files-pri/T1-F1/a.png", slack)
    assert not may_receive_token("http://slack.com:443/files-pri/a.png", slack)
    assert not may_receive_token("https://127.0.0.1:x/a.png", slack)
    attachment = Attachment(ref="https://evil.example/a.png", name="a.png")
    try:
        await download("xoxb-secret", api, attachment, 1000)
    except DownloadError as exc:
        assert "not on a Slack host" in str(exc)
    else:
        raise AssertionError("the download should have been refused")


@pytest.mark.network
async def test_read_channel_reads_only_channels_the_requester_shares_with_parley() -> None:
    now = time.time()
    async with FakeSlack() as fake:
        fake.users.update({"UANA": "Ana", "UBOB": "Bob"})
        fake.channel_names.update({"CGEN": "general", "C0HR00001": "hr", "C0SALES01": "sales"})
        fake.members.update(
            {
                "CGEN": ["UANA", "UBOB", fs.BOT_USER],
                "C0HR00001": ["UBOB", fs.BOT_USER],
                "C0SALES01": ["UANA"],
            }
        )
        fake.history["CGEN"] = [
            {"type": "message", "user": "UBOB", "text": "old news", "ts": f"{now - 7200:.6f}"},
            {"type": "message", "user": "UBOB", "text": "deploy at 3", "ts": f"{now - 1800:.6f}"},
            {"type": "message", "user": fs.BOT_USER, "text": "noted", "ts": f"{now - 60:.6f}"},
        ]
        fake.history["C0HR00001"] = [
            {"type": "message", "user": "UBOB", "text": "salaries", "ts": f"{now - 60:.6f}"}
        ]
        adapter = SlackAdapter(
            config=SlackConfig(bot_token=fake.bot_token, signing_secret="s", api_url=fake.api_url)
        )
        registry = builtin_registry()
        registry.register(read_channel_tool(Channels({"slack": adapter})))
        model = ScriptedModel(
            [
                turn(call("read_channel", "t1", channel="#general", since="1h")),
                turn(
                    call("read_channel", "t2", channel="C0HR00001", since="1d"),
                    call("read_channel", "t3", channel="<#C0SALES01|sales>", since="1d"),
                ),
                reply("Deploy at 3."),
            ]
        )
        context = RunContext(
            conversation_id="slack:T1:DANA:-", platform="slack", user_id="UANA", chat_id="DANA",
            team_id="T1",
        )  # fmt: skip
        outcome = await Agent(model, registry).run("summarise the last hour in #general", context)
        await adapter.stop()
    assert isinstance(outcome, Finished)  # read-only: no approval asked
    general = model.requests[1].messages[-1].tool_results[0].content
    assert "Bob: deploy at 3" in general and "you (Parley): noted" in general
    assert "old news" not in general
    assert general.index("deploy at 3") < general.index("noted")
    hr, sales = model.requests[2].messages[-1].tool_results
    assert hr.is_error and "both Parley and the user are members" in hr.content
    assert "salaries" not in hr.content and "salaries" not in str(model.requests)
    assert sales.is_error and "both Parley and the user are members" in sales.content
    assert len(fake.method_calls("conversations.history")) == 1


async def test_without_thread_history_the_mention_is_still_answered(redis, caplog) -> None:
    model = ScriptedModel([reply("Answered anyway.")])
    async with slack_bot(redis, model) as s:
        root = fs.message_ts()
        # Slack answers thread_not_found (e.g. the thread was deleted meanwhile)
        await s.event(fs.mention_event("UANA", "what now?", thread_ts=root))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
    assert s.fake.in_channel("CGEN")[0].body == "Answered anyway."
    assert model.turn_requests[0].messages[-1].text == "what now?"
    assert len(s.fake.method_calls("conversations.replies")) == 1
    assert any("thread history unavailable" in r.getMessage() for r in caplog.records)


async def test_a_mention_in_a_thousand_message_thread_makes_a_bounded_number_of_calls(
    redis,
) -> None:
    """Attack: a thread of 1,000 messages by 1,000 people (and each mentioning another), then
    one mention of Parley: reading it costs a few pages and a bounded number of name lookups
    (1,000 users.info calls before the bound)."""
    model = ScriptedModel([reply("Read it.")])
    async with slack_bot(redis, model) as s:
        people = [f"U{n:07d}" for n in range(1000)]
        s.fake.users.update({user: f"Person {n}" for n, user in enumerate(people)})
        root = "1700000000.000000"
        made = s.fake.thread(
            "CGEN",
            root,
            *((user, f"point {n} <@{people[n - 1]}>") for n, user in enumerate(people)),
        )
        mention_ts = f"1700000000.{len(made):06d}"
        mention = fs.mention_event("UANA", "<@UBOT> sum up", thread_ts=root, ts=mention_ts)
        await s.event(mention)
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
    authors = set(people)  # (the requester's own lookup, for their time zone, aside)
    lookups = [c for c in s.fake.method_calls("users.info") if c.body.get("user") in authors]
    assert len(lookups) <= slack_context.NAME_LOOKUPS
    assert len(s.fake.method_calls("conversations.replies")) <= slack_context.HISTORY_PAGES
    shown = model.turn_requests[0].messages[-1].text
    assert "[Person 999]: point 999 @Person 998" in shown  # the newest are named
