"""An MCP server's questions during a tool call (elicitation) and its progress, end to end: a
real `mcp` SDK server over stdio whose tools ask through `Resolve(Elicit(...))` and report
progress, the worker with Redis, and the recording adapter. The question is the requester's, survives a restart, and a decline
or a refusal reaches the server as the specification says."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest
import redis.asyncio as aioredis

from adapters.base import ConversationKey
from agent.mcp import McpConfig, McpToolbox, Timing
from agent.mcp.elicitation import SECRET_REFUSED
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, parley, running, settings, with_approvers
from tests.bot.recording import Posted, RecordingAdapter, click, message, press
from tests.fakes.mcp_process import stdio_server
from tests.helpers import until

pytestmark = pytest.mark.process

TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0)
GROUP = ConversationKey(platform="telegram", chat_id="-100")
NOT_PARLEY = "*test* (a connected tool, not Parley) asks:"


def result_of(model: ScriptedModel, request: int) -> str:
    return str(model.requests[request].messages[-1].content[0].content)


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_an_enum_is_asked_as_buttons_only_the_requester_answers_and_the_call_completes(
    redis: aioredis.Redis, protocol: Literal["2025-11-25", "2026-07-28"]
) -> None:
    # 2026-07-28: the server answers input_required; 2025-11-25: it asks mid-call
    model = ScriptedModel([turn(call("test__pick_colour", item="lamp")), reply("Labelled.")])
    # Bo approves others' actions here, but answers no one's questions
    config = with_approvers(settings(), "77")
    async with parley(
        redis, model, server=stdio_server(protocol=protocol), config=config
    ) as harness:
        await harness.handle(message(GROUP, "label the lamp", direct=False), within=60)
        question = harness.adapter.prompt(GROUP)
        assert question.message.text.startswith(NOT_PARLEY)  # the server's name, not Parley's
        assert "Which colour should the label be?" in question.message.text
        assert [b.label for b in question.message.buttons] == ["red", "green", "blue", "Decline"]
        assert question.message.private_to is None  # asked where the run came from

        await harness.submit(press(question, "blue", user="77", name="Bo"))
        await harness.settle(within=30)
        assert harness.adapter.notices[-1][1:] == ("Only Ana can answer this.", True)
        assert len(model.requests) == 1  # Bo's press went nowhere

        await harness.handle(press(question, "green"), within=60)
        assert "lamp: colour=green" in result_of(model, 1)  # the server got Ana's answer
        assert harness.adapter.texts(GROUP)[-1] == "Labelled."


async def test_a_boolean_is_yes_or_no_and_a_decline_is_passed_back(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel(
        [
            turn(call("test__confirm_send", to="ops")),
            reply("Sent."),
            turn(call("test__confirm_send", to="all")),
            reply("Not sent."),
        ]
    )
    async with parley(redis, model, server=stdio_server()) as harness:
        await harness.handle(message(GROUP, "send the report to ops", direct=False), within=60)
        question = harness.adapter.prompt(GROUP)
        assert [b.label for b in question.message.buttons] == ["Yes", "No", "Decline"]
        assert "Send the report to ops?" in question.message.text
        await harness.handle(press(question, "Yes"), within=60)
        assert "send to ops: sure=True" in result_of(model, 1)

        await harness.handle(message(GROUP, "and to everyone", direct=False), within=60)
        await harness.handle(press(harness.adapter.prompt(GROUP), "Decline"), within=60)
        assert "send to all: the user chose decline" in result_of(model, 3)
        assert harness.adapter.texts(GROUP)[-1] == "Not sent."


async def test_a_restart_while_the_question_waits_loses_nothing(redis: aioredis.Redis) -> None:
    model = ScriptedModel([turn(call("test__pick_colour", item="door")), reply("Done.")])
    async with parley(redis, model, server=stdio_server()) as harness:
        await harness.handle(message(GROUP, "label the door", direct=False), within=60)
        question = harness.adapter.prompt(GROUP)
    # the process and its MCP connection are gone; a new one takes the press
    async with parley(redis, model, server=stdio_server()) as harness:
        await harness.handle(press(question, "red"), within=60)
        assert "door: colour=red" in result_of(model, 1)
        assert harness.adapter.texts(GROUP)[-1] == "Done."


async def test_a_request_for_a_secret_is_refused_without_asking_anyone(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([turn(call("test__sign_in")), reply("I can't do that here.")])
    async with parley(redis, model, server=stdio_server()) as harness:
        await harness.handle(message(GROUP, "sign me in", direct=False), within=60)
        assert not [p for p in harness.adapter.in_conversation(GROUP) if p.message.buttons]
        refused = model.requests[1].messages[-1].content[0]
        assert refused.is_error
        assert SECRET_REFUSED.format(server="test", field="password") in refused.content
        assert harness.adapter.texts(GROUP)[-1] == "I can't do that here."


async def test_an_approved_call_that_asks_waits_for_the_answer_then_completes(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([turn(call("test__pick_colour", item="box")), reply("Boxed.")])
    async with parley(redis, model, server=stdio_server(approval="always")) as harness:
        await harness.handle(message(GROUP, "label the box", direct=False), within=60)
        approval = harness.adapter.prompt(GROUP)
        assert [b.label for b in approval.message.buttons] == ["Approve", "Reject"]
        await harness.handle(click(GROUP, approval, "approve"), within=60)
        question = harness.adapter.prompt(GROUP)
        assert question.message.text.startswith(NOT_PARLEY)
        await harness.handle(press(question, "blue"), within=60)
        assert "box: colour=blue" in result_of(model, 1)
        assert harness.adapter.texts(GROUP)[-1] == "Boxed."


async def test_a_free_text_answer_is_typed_and_an_unfitting_one_is_asked_again(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([turn(call("test__pick_colour", item="cup")), reply("Ok.")])
    async with parley(redis, model, server=stdio_server()) as harness:
        await harness.handle(message(GROUP, "label the cup", direct=False), within=60)
        await harness.handle(message(GROUP, "purple", direct=False), within=60)
        again = harness.adapter.prompt(GROUP)
        assert again.message.text.startswith("That answer does not fit")
        assert len(model.requests) == 1  # the server was not called with "purple"
        await harness.handle(message(GROUP, "Red", direct=False), within=60)
        assert "cup: colour=red" in result_of(model, 1)


async def test_a_servers_progress_shows_as_the_status_line(redis: aioredis.Redis) -> None:
    model = ScriptedModel([turn(call("test__count_up", steps=3)), reply("Counted.")])
    adapter = RecordingAdapter()
    adapter.progress_delay = 0  # type: ignore[attr-defined]  # shown at once, not after 0.5 s
    box = McpToolbox(McpConfig(mcpServers={"test": stdio_server()}), TIMING)
    await box.start()
    try:
        async with running(redis, model, adapter=adapter, tool_source=box.source()) as harness:
            await harness.handle(message(GROUP, "count to three", direct=False), within=60)
    finally:
        await box.stop()
    shown = [status for chat, status in adapter.progress_log if chat == GROUP.id]
    from_server = [s for s in shown if s and s.startswith("test:")]
    assert from_server == ["test: step 1 of 3", "test: step 2 of 3", "test: step 3 of 3"]
    assert adapter.texts(GROUP)[-1] == "Counted."


async def test_an_expired_question_is_never_answered_for_the_requester(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__pick_colour", item="mug")), reply("never")])
    config = settings(PARLEY_DECISION_TTL=0.5)
    timing = replace(TIMING, question_wait=0.5)
    async with parley(
        redis, model, server=stdio_server(ledger), config=config, timing=timing
    ) as harness:
        await harness.handle(message(GROUP, "label the mug", direct=False), within=60)
        question = harness.adapter.prompt(GROUP)
        await until(lambda: ledger.exists())
        await harness.submit(press(question, "red"))
        await harness.settle(within=30)
        assert "expired" in harness.adapter.notices[-1][1]
        # the server heard "cancel" once the call's wait was over, and was never called again
        assert ledger.read_text().splitlines() == ["pick_colour mug: the user chose cancel"]
        assert len(model.requests) == 1


OTHER = ConversationKey(platform="telegram", chat_id="-200")


def purged(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


async def approve_purge(harness: Harness, item: str) -> Posted:
    """Ask for a purge, approve it, and give back the server's question it then asks."""
    await harness.handle(message(GROUP, f"purge the {item}", direct=False), within=60)
    await harness.handle(click(GROUP, harness.adapter.prompt(GROUP), "approve"), within=60)
    question = harness.adapter.prompt(GROUP)
    assert f"Really purge every {item}?" in question.message.text
    assert "waits 10 minutes for your answer" in question.message.text  # it says how long
    return question


@pytest.mark.parametrize(("answer", "done"), [("No", []), ("Yes", ["purge logs"])])
async def test_a_destructive_call_that_asks_hears_the_answer_on_the_same_call(
    redis: aioredis.Redis, tmp_path: Path, answer: str, done: list[str]
) -> None:
    # The server acts unless told No: a question answered "cancel" at once would have purged
    # before anyone was asked, and a Yes would then have purged a second time.
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__purge", item="logs")), reply("Finished.")])
    async with parley(redis, model, server=stdio_server(ledger)) as harness:
        question = await approve_purge(harness, "logs")
        assert purged(ledger) == []  # nothing happened while the question waits
        await harness.handle(press(question, answer), within=60)
        assert purged(ledger) == done  # once at most, on the server's own count
        said = "purged logs" if done else "kept logs"
        assert said in result_of(model, 1)
        assert harness.adapter.texts(GROUP)[-1] == "Finished."


async def test_a_destructive_call_left_unanswered_across_a_restart_is_not_made_again(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__purge", item="cache")), reply("Told them.")])
    async with parley(redis, model, server=stdio_server(ledger)) as harness:
        question = await approve_purge(harness, "cache")
    async with parley(redis, model, server=stdio_server(ledger)) as harness:
        await harness.handle(press(question, "Yes"), within=60)
        told = model.requests[1].messages[-1].content[0]
        assert told.is_error and "Parley restarted" in told.content
        assert "did not make the call again" in told.content
        assert harness.adapter.texts(GROUP)[-1] == "Told them."
    assert purged(ledger) == []  # the open call ended with Parley; nothing made it again


async def test_a_destructive_call_whose_wait_ran_out_completes_at_most_once(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    model = ScriptedModel([turn(call("test__purge", item="tmp")), reply("Told them.")])
    timing = replace(TIMING, question_wait=0.5)
    async with parley(redis, model, server=stdio_server(ledger), timing=timing) as harness:
        await harness.handle(message(GROUP, "purge the tmp", direct=False), within=60)
        await harness.handle(click(GROUP, harness.adapter.prompt(GROUP), "approve"), within=60)
        question = harness.adapter.prompt(GROUP)
        await until(lambda: purged(ledger) == ["purge tmp"])  # "cancel": this server goes on
        await harness.handle(press(question, "Yes"), within=60)
        told = model.requests[1].messages[-1].content[0]
        assert told.is_error and "was told the question was dismissed" in told.content
        assert "purged tmp" in told.content  # what the server did is not hidden
    assert purged(ledger) == ["purge tmp"]


async def test_a_schema_default_is_offered_first_as_the_suggested_answer(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([turn(call("test__pick_size", item="box")), reply("Sized.")])
    async with parley(redis, model, server=stdio_server()) as harness:
        await harness.handle(message(GROUP, "size the box", direct=False), within=60)
        question = harness.adapter.prompt(GROUP)
        assert [b.label for b in question.message.buttons] == ["M", "S", "L", "Skip", "Decline"]
        assert "Suggested: M" in question.message.text
        await harness.handle(press(question, "M"), within=60)
        assert "box: size=M" in result_of(model, 1)


async def test_a_shared_servers_question_goes_only_to_the_person_whose_call_asked(
    redis: aioredis.Redis,
) -> None:
    # Ana's slow call is in flight on the shared server when Bo's call asks: the question is
    # Bo's alone, and Ana's call goes on to its own result.
    model = ScriptedModel(
        [
            turn(call("test__slow", seconds=1.5)),
            turn(call("test__pick_colour", item="vase")),
            reply("Slept."),
            reply("Labelled."),
        ]
    )
    box = McpToolbox(McpConfig(mcpServers={"test": stdio_server()}), TIMING)
    await box.start()
    calls = box.servers["test"]._questions
    try:
        async with running(redis, model, tool_source=box.source()) as harness:
            await harness.submit(message(GROUP, "sleep a bit", direct=False))
            await until(lambda: len(calls._calls) == 1)
            bo = message(OTHER, "label the vase", user="77", name="Bo", direct=False)
            await harness.handle(bo, within=60)
            assert not [p for p in harness.adapter.in_conversation(GROUP) if p.message.buttons]
            assert harness.adapter.texts(GROUP)[-1] == "Slept."
            assert "slept" in result_of(model, 2)
            question = harness.adapter.prompt(OTHER)
            assert "Which colour should the label be?" in question.message.text
            await harness.handle(press(question, "red", user="77", name="Bo"), within=60)
            assert "vase: colour=red" in result_of(model, 3)
            assert harness.adapter.texts(OTHER)[-1] == "Labelled."
    finally:
        await box.stop()


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_fields_the_person_skips_reach_the_server_as_their_defaults(
    redis: aioredis.Redis, protocol: Literal["2025-11-25", "2026-07-28"]
) -> None:
    # SEP-1034: an accepted form carries every schema default the person did not fill
    model = ScriptedModel([turn(call("test__profile")), reply("Set up.")])
    async with parley(redis, model, server=stdio_server(protocol=protocol)) as harness:
        await harness.handle(message(GROUP, "set up my profile", direct=False), within=60)
        name = harness.adapter.prompt(GROUP)
        assert [b.label for b in name.message.buttons] == ["John Doe", "Skip", "Decline"]
        await harness.handle(press(name, "Skip"), within=60)
        age = harness.adapter.prompt(GROUP)
        assert "Suggested: 30" in age.message.text
        await harness.handle(press(age, "Skip"), within=60)
        verified = harness.adapter.prompt(GROUP)
        assert [b.label for b in verified.message.buttons] == ["Yes", "No", "Skip", "Decline"]
        await harness.handle(press(verified, "No"), within=60)
        said = result_of(model, 1)
        assert "sent ['age', 'name', 'verified']: John Doe, 30, False" in said


@pytest.mark.parametrize("prefix", ["open:", "again:", "server:"])
async def test_a_servers_request_state_shaped_like_parleys_own_is_echoed_exactly(
    redis: aioredis.Redis, tmp_path: Path, prefix: str
) -> None:
    # a 2026-07-28 server's requestState is opaque, whatever it starts with: not taken for an
    # open call of Parley's or for answers given earlier; the server gets it back as it sent
    # it (it verifies it) with the person's answer, and the call is made once
    model = ScriptedModel([turn(call("test__pick_colour", item="cup")), reply("Labelled.")])
    ledger = tmp_path / "ledger"
    server = stdio_server(ledger, protocol="2026-07-28", env={"MCP_STATE_PREFIX": prefix})
    async with parley(redis, model, server=server) as harness:
        await harness.handle(message(GROUP, "label the cup", direct=False), within=60)
        question = harness.adapter.prompt(GROUP)
        assert "Which colour should the label be?" in question.message.text
        await harness.handle(press(question, "red"), within=60)
        assert "cup: colour=red" in result_of(model, 1)
    assert ledger.read_text().splitlines() == ["pick_colour cup: colour=red"]
