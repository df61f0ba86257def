"""JSON logs carry the run id from a run's first line, so one run's lines can be found."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from agent.builtin_tools import builtin_registry
from agent.tools import tool
from bot.ops.logs import JsonFormatter
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running
from tests.bot.recording import dm, message

log = logging.getLogger("tests.bot.noisy")


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level, root.level = root.level, logging.INFO
    try:
        yield captured
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_a_new_runs_lines_carry_its_id_from_the_first(
    redis: aioredis.Redis, lines: io.StringIO
) -> None:
    @tool
    async def noisy(word: str) -> str:
        """Say a word, and log it.

        Args:
            word: the word
        """
        log.info("noisy says %s", word)
        return word

    registry = builtin_registry()
    registry.register(noisy)
    model = ScriptedModel(
        [
            turn(call("noisy", word="one")),
            reply("said one"),
            turn(call("noisy", word="two")),
            reply("said two"),
        ]
    )
    chat = dm()
    async with running(redis, model, tools=registry) as harness:
        await harness.submit(message(chat, "say one"))
        await harness.settle()
        first = (await harness.runtime.sessions.load(chat.id)).state
        await harness.submit(message(chat, "say two"))
        await harness.settle()
        second = (await harness.runtime.sessions.load(chat.id)).state
    assert first is not None and second is not None and first.run_id != second.run_id
    said = [
        entry
        for entry in map(json.loads, lines.getvalue().splitlines())
        if entry["logger"] == "tests.bot.noisy"
    ]
    assert [(e["message"], e["run"]) for e in said] == [
        ("noisy says one", first.run_id),
        ("noisy says two", second.run_id),
    ]
    assert all(e["conversation"] == chat.id for e in said)
