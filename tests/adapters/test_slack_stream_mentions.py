"""A streamed Slack answer follows the same mention rule as a post: the model (obeying text
someone planted) cannot ping the channel through chat.startStream / appendStream /
stopStream, an edit that replaces a stream, or the thread's status line."""

from __future__ import annotations

import asyncio

from adapters.slack.format import streamed_markdown
from tests.adapters.test_slack_stream import finished, slack_bot, until
from tests.fakes import anthropic as fa
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack

# What an injected instruction makes the model write; a small chunk splits every token
# across several stream calls.
PLANTED = (
    "Summary done. <!channel> <!here|here> @everyone <@UEVE> <!subteam^SOPS|@ops> "
    "please read this now, and cc <@UBOB> who asked for it. " * 2
)
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")
PINGS = ("<!channel>", "<!here", "<@UEVE>", "<!subteam^", "@everyone")


def stream_texts(fake: FakeSlack) -> list[str]:
    texts = []
    for method in STREAM_METHODS:
        for call in fake.method_calls(method):
            texts.append(str(call.body.get("markdown_text") or ""))
            texts += [str(c.get("text") or "") for c in call.body.get("chunks") or []]
    return texts


async def test_a_streamed_answer_pings_only_whom_the_requester_typed(redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(fa.streamed(PLANTED, pace=0.02, chunk=3))
        await s.event(fs.mention_event("UANA", "summarise for <@UBOB>"))
        await until(lambda: finished(s.fake))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert len(post.appends) >= 3, "the answer streamed"
        sent = "".join(stream_texts(s.fake))
        assert sent == post.text
        for ping in PINGS:
            assert ping not in sent, ping
            assert all(ping not in seen for seen in post.appends), ping
        assert "@\u2060channel" in post.text and "@\u2060everyone" in post.text
        assert "@\u2060ops" in post.text and "@\u2060UEVE" in post.text
        assert "<@UBOB>" in post.text  # typed by the requester: it may ping
        assert "<@UANA>" not in PLANTED and not s.fake.method_calls("chat.postMessage")


async def test_a_stream_replaced_by_an_edit_pings_nobody(redis) -> None:
    async with slack_bot(redis) as s:
        s.fake.refuse_stream("chat.stopStream", "internal_error")
        s.hosted.script(fa.streamed(PLANTED, pace=0.05, chunk=20))
        await s.event(fs.mention_event("UANA", "summarise"))
        await until(lambda: bool(s.fake.in_channel("CGEN")) and s.fake.in_channel("CGEN")[0].edits)
        await s.harness.settle()
        (update,) = s.fake.method_calls("chat.update")
        shown = str(update.body.get("text")) + str(update.body.get("blocks"))
        for ping in PINGS:
            assert ping not in shown, ping
        assert "@\u2060channel" in shown


async def test_the_thread_status_line_pings_nobody(redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(
            fa.tool(
                "calculator", thought="Checking with <!channel> first.", expression="1+1", pace=0.4
            ),
            fa.streamed("It is 2.", pace=0.0),
        )
        await s.event(fs.mention_event("UANA", "1+1?"))
        await until(lambda: finished(s.fake))
        await s.harness.settle()
        calls = s.fake.method_calls("assistant.threads.setStatus")
        statuses = [str(c.body["status"]) for c in calls]
        assert any("@\u2060channel" in status for status in statuses), statuses
        assert not any("<!channel>" in status for status in statuses)


def test_what_is_streamed_never_has_to_change_when_more_arrives() -> None:
    text = "Ping <!channel> and @here, <@UBOB>, mail bob@example.com or <https://x.io|x>."
    allowed = frozenset({"@UBOB"})
    whole = streamed_markdown(text, allowed, final=True)
    for end in range(len(text) + 1):
        shown = streamed_markdown(text[:end], allowed, final=False)
        assert whole.startswith(shown), (end, shown)
    assert "<!channel>" not in whole and "@\u2060here" in whole and "<@UBOB>" in whole
    assert "bob@example.com" in whole and "<https://x.io|x>" in whole


async def test_model_links_in_a_post_never_unfurl(redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(fa.streamed("See https://files.example.com/private/payroll.png", pace=0))
        await s.event(fs.mention_event("UANA", "where is it?"))
        await until(lambda: bool(s.fake.method_calls("chat.postMessage")))
        await s.harness.settle()
        (post,) = s.fake.method_calls("chat.postMessage")
        assert post.body["unfurl_links"] in (False, "0", "false")
        assert post.body["unfurl_media"] in (False, "0", "false")


async def test_a_stream_cut_after_spaces_ends_without_replacing_the_message(redis) -> None:
    # Every delta ends with a space and the final answer is trimmed. The last delta comes
    # after a pause longer than the stream interval, so it is shown at once: a stream that
    # sent its space could not end on the answer and would be replaced by a chat.update.
    answer = "One two six ten " * 20
    last = len(answer) // 4 - 1

    async def gate(n: int) -> None:
        await asyncio.sleep(0.3 if n == last else 0.02)

    async with slack_bot(redis) as s:
        s.hosted.script(fa.streamed(answer, chunk=4, gate=gate))
        await s.event(fs.mention_event("UANA", "count"))
        await until(lambda: finished(s.fake))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert len(post.appends) >= 2, "the answer streamed"
        assert "".join(stream_texts(s.fake)) == post.text
        assert not s.fake.method_calls("chat.update")
        assert streamed_markdown("Done. \n", frozenset(), final=False) == "Done."
