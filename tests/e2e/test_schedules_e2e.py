"""Schedules in real time across real `parley` processes: `every 5 seconds` with the minimum
lowered, two workers, every worker killed with SIGKILL between slots, one catch-up."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest

from bot.runtime.inbox import decode
from tests.e2e.test_processes import Cluster, texts, until, world  # noqa: F401 (a fixture)
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import last_user_text, tool_results
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.e2e
PERIOD = 5


def script(body: dict[str, Any]) -> fa.Item:
    if tool_results(body):
        return fa.text("Scheduled.")
    text = last_user_text(body)
    if "comes from a schedule" in text:
        return fa.text("tock")
    if text.startswith("tick"):
        return fa.tool("schedule", when=f"every {PERIOD} seconds", objective="say tock")
    return fa.text(f"echo: {text}")


async def slots(redis: Any) -> list[int]:
    found = []
    for _, fields in await redis.xrange("parley:inbox"):
        event_id = decode(fields[b"event"]).event_id
        if event_id.startswith("schedule:"):
            found.append(int(event_id.rsplit(":", 1)[1]))
    return found


def tocks(telegram: FakeTelegram) -> list[str]:
    return [t for t in texts(telegram, 42) if t.endswith("tock")]


async def test_each_slot_runs_once_across_workers_and_a_kill_between_slots_catches_up_once(
    world,  # noqa: F811
    redis: Any,
) -> None:
    cluster, telegram, _ = world
    cluster.env["PARLEY_SCHEDULE_MIN_INTERVAL"] = str(PERIOD)
    # the hosted model answers from this module's script
    hosted_url = cluster.env["ANTHROPIC_BASE_URL"]
    async with fa.FakeAnthropic() as hosted:
        hosted.responder = script
        cluster.env["ANTHROPIC_BASE_URL"] = hosted.url
        gateway = await cluster.start("gateway")
        workers = [await cluster.start("worker") for _ in range(2)]
        for process in [gateway, *workers]:
            await cluster.ready(process)
        telegram.push(telegram.message(chat_id=42, user_id=42, text="tick every 5 seconds"))
        await until(lambda: bool(telegram.chat(42)))
        prompt = telegram.chat(42)[0]
        assert "every 5 seconds" in prompt.text and "say tock" in prompt.text
        telegram.click(prompt, "Approve", user_id=42)
        await until(lambda: len(tocks(telegram)) >= 3, within=40)

        # every worker dies between two slots; two or three slots pass with nobody running
        await asyncio.sleep(PERIOD / 2)
        for worker in workers:
            await cluster.stop(worker, signal.SIGKILL)
        before = len(tocks(telegram))
        down_since = time.time()
        await asyncio.sleep(3 * PERIOD)
        missed = int((time.time() - down_since) // PERIOD)
        assert missed >= 2
        revived = await cluster.start("worker")
        await cluster.ready(revived)
        await until(lambda: len(tocks(telegram)) >= before + 3, within=40)
        await asyncio.sleep(1.5)

    cluster.env["ANTHROPIC_BASE_URL"] = hosted_url
    started = await slots(redis)
    assert len(started) == len(set(started)), "a slot started twice"
    answers = tocks(telegram)
    assert len(answers) == len(started)  # one answer per started slot, none twice
    late = [a for a in answers if "late: it was due" in a]
    assert len(late) == 1, answers  # the missed slots ran once, as one late run
    gaps = [b - a for a, b in zip(started, started[1:], strict=False)]
    assert all(gap % PERIOD == 0 for gap in gaps)
    assert max(gaps) >= (missed + 1) * PERIOD  # the missed slots were skipped, not replayed


async def test_a_trigger_through_a_real_gateway_starts_one_objective(
    world,  # noqa: F811
    tmp_path: Any,
) -> None:
    import json

    import aiohttp

    from bot.features.triggers import signature_of
    from tests.e2e.test_processes import free_port

    cluster, telegram, _ = world
    secret = "e2e-secret-e2e-secret"
    triggers = tmp_path / "triggers.json"
    triggers.write_text(
        json.dumps(
            {"alerts": {"secret": secret, "conversation": "telegram:42", "objective": "tick alert"}}
        )
    )
    port = free_port()
    process = await cluster.start(
        "run", PARLEY_TRIGGERS_CONFIG=str(triggers), PARLEY_HTTP_PORT=str(port)
    )
    await cluster.ready(process)
    body = json.dumps({"alert": "disk full on db-1"}).encode()
    stamp = str(int(time.time()))
    signature = signature_of(secret.encode(), stamp, "run-1", body)
    good = {
        "X-Parley-Signature": signature,
        "X-Parley-Timestamp": stamp,
        "X-Parley-Delivery": "run-1",
    }
    url = f"http://127.0.0.1:{port}/hooks/alerts"
    async with aiohttp.ClientSession() as http:
        statuses = []
        for headers in (good, good, {**good, "X-Parley-Signature": "v1=" + "0" * 64}):
            async with http.post(url, data=body, headers=headers) as response:
                statuses.append(response.status)
    assert statuses == [202, 200, 401]  # started, replayed, forged
    await until(lambda: bool(telegram.chat(42)))
    await asyncio.sleep(1.5)
    [answer] = texts(telegram, 42)  # the model echoes the turn it was given
    assert answer.startswith("⚡ Triggered by alerts\n\necho: ")
    assert "disk full on db-1" in answer and 'trust="untrusted"' in answer
    assert answer.endswith("tick alert")  # the objective comes last, after the body
