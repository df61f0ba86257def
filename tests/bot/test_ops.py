"""Metrics, health and readiness, logs without secrets, rate limits and budgets."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator

import aiohttp
import pytest
import redis.asyncio as aioredis

from agent.llm.usage import MeteredModel
from agent.messages import Usage
from bot.config import Settings
from bot.conversation.limits import GLOBAL_BUDGET_SPENT, RATE_LIMITED, USER_BUDGET_SPENT, Limits
from bot.ops.http import HttpServer
from bot.ops.logs import configure_logging, log_context
from bot.wiring.app import _redis_check
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running
from tests.bot.recording import dm, message


async def test_metrics_health_and_readiness(redis: aioredis.Redis) -> None:
    async with running(redis, ScriptedModel([reply("hi")])) as harness:
        await harness.submit(message(dm(), "hello"))
        await harness.settle()
        server = HttpServer("127.0.0.1", 0)
        server.add_check("redis", _redis_check(redis))
        await server.start()
        base = f"http://127.0.0.1:{server.metrics_port}"
        try:
            async with aiohttp.ClientSession() as http:
                metrics = await (await http.get(f"{base}/metrics")).text()
                health = await http.get(f"{base}/healthz")
                ready = await http.get(f"{base}/readyz")
                assert health.status == 200 and ready.status == 200
                assert (await ready.json())["checks"]["redis"]["ok"] is True
                broken = aioredis.Redis(port=1)
                server.add_check("broken", _redis_check(broken))
                not_ready = await http.get(f"{base}/readyz")
                assert not_ready.status == 503
                await broken.aclose()
        finally:
            await server.stop()
    for name in (
        'parley_messages_in_total{kind="message",platform="telegram"}',
        'parley_runs_total{outcome="finished"}',
        "parley_run_steps_bucket",
        "parley_queue_lag_seconds_bucket",
        'parley_deliveries_total{platform="telegram",result="sent"}',
        "parley_pending_decisions",
        "parley_model_calls_total",
        "parley_breaker_state",
    ):
        assert name in metrics, name


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield stream
    root.handlers[:], _ = saved
    root.setLevel(saved[1])


SECRETS = ["xoxb-1111-2222-abcdefSECRET", "123456:AAH-telegram-SECRET-token", "sk-ant-api03-SECRET"]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_logs_never_carry_secrets(captured: io.StringIO, fmt: str) -> None:
    configure_logging("DEBUG", fmt, SECRETS)
    handler = logging.getLogger().handlers[0]
    handler.setStream(captured)  # type: ignore[attr-defined]
    log = logging.getLogger("parley.test")
    token = log_context.set({"conversation": "telegram:-:42:-", "run": "r1"})
    try:
        log.info("calling https://api.telegram.org/bot%s/getMe", SECRETS[1])
        log.warning("slack said invalid_auth for %s", SECRETS[0])
        try:
            raise RuntimeError(f"Authorization: Bearer {SECRETS[2]}")
        except RuntimeError:
            log.exception("provider failed")
    finally:
        log_context.reset(token)
    output = captured.getvalue()
    assert output.count("[redacted]") >= 3
    for secret in SECRETS:
        assert secret not in output
    if fmt == "json":
        lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        assert lines[0]["conversation"] == "telegram:-:42:-" and lines[0]["run"] == "r1"
        assert "exception" in lines[-1]


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def limits(redis: aioredis.Redis, clock: Clock, **values: int) -> Limits:
    settings = Settings.load(env_file=None, limits={k: v for k, v in values.items()})
    return Limits(redis, "parley", settings.limits, clock=clock)


async def test_rate_limit_trips_and_recovers(redis: aioredis.Redis) -> None:
    clock = Clock()
    guard = limits(redis, clock, PARLEY_RATE_LIMIT_PER_MINUTE=3)
    verdicts = [await guard.admit("telegram:42") for _ in range(4)]
    assert [v.ok for v in verdicts] == [True, True, True, False]
    assert verdicts[-1].message == RATE_LIMITED
    assert (await guard.admit("telegram:7")).ok  # per user
    clock.now += 61
    assert (await guard.admit("telegram:42")).ok


async def test_budgets_and_the_kill_switch(redis: aioredis.Redis) -> None:
    clock = Clock()
    guard = limits(redis, clock, PARLEY_USER_DAILY_TOKENS=1000, PARLEY_DAILY_TOKENS=1500)
    await guard.charge("telegram:42", 1000)
    assert (await guard.admit("telegram:42")).message == USER_BUDGET_SPENT
    assert (await guard.admit("telegram:7")).ok
    await guard.charge("telegram:7", 600)
    assert (await guard.admit("telegram:7")).message == GLOBAL_BUDGET_SPENT
    assert (await guard.admit("telegram:99")).message == GLOBAL_BUDGET_SPENT
    usage = await guard.usage("telegram:42")
    assert (usage.user, usage.everyone) == (1000, 1600)
    clock.now += 86_400  # a new UTC day
    assert (await guard.admit("telegram:42")).ok
    for key in [k async for k in redis.scan_iter("parley:usage:*")]:
        assert await redis.ttl(key) > 0


async def test_status_shows_usage_and_limits_reach_the_user(redis: aioredis.Redis) -> None:
    clock = Clock()
    guard = limits(redis, clock, PARLEY_RATE_LIMIT_PER_MINUTE=2)
    async with running(redis, ScriptedModel([reply("one"), reply("two")])) as harness:
        executor = harness.runtime.executor
        executor.admission = guard.admission
        executor.runner.charge = guard.charge_event
        executor.commands.usage = guard.usage_text
        chat = dm()
        for text in ("a", "b", "c"):
            await harness.submit(message(chat, text))
            await harness.settle()
        await harness.submit(message(chat, "/status", command="status"))
        await harness.settle()
        texts = harness.adapter.texts(chat)
        assert texts[:3] == ["one", "two", RATE_LIMITED]
        assert "Today you've used 30 of your 500,000 tokens" in texts[3]


async def test_status_shows_todays_estimated_cost_with_cache_prices(
    redis: aioredis.Redis,
) -> None:
    guard = limits(redis, Clock())
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=10_000)
    usage = usage + Usage(cache_write_tokens=2000)
    model = MeteredModel(ScriptedModel([reply("one", usage=usage)]), {"scripted-1": (3.0, 15.0)})
    async with running(redis, model) as harness:
        executor = harness.runtime.executor
        executor.runner.charge = guard.charge_event
        executor.commands.usage = guard.usage_text
        chat = dm()
        await harness.submit(message(chat, "a"))
        await harness.settle()
        await harness.submit(message(chat, "/status", command="status"))
        await harness.settle()
        status = harness.adapter.texts(chat)[-1]
    # (1000 input + 0.1 x 10,000 read + 1.25 x 2000 written) x $3 + 100 output x $15, per Mtok
    assert "used 13,100 of your 500,000 tokens" in status
    assert "about $0.0150 at list prices" in status


async def test_charges_are_written_once_a_second_and_counted_meanwhile(
    redis: aioredis.Redis,
) -> None:
    guard = limits(redis, Clock(), PARLEY_USER_DAILY_TOKENS=1000)
    key = "parley:usage:" + time.strftime("%Y%m%d", time.gmtime(Clock()())) + ":telegram:1"
    await guard.charge("telegram:1", 100, 0.5)  # the first is written at once
    assert int(await redis.get(key)) == 100
    await guard.charge("telegram:1", 950, 0.25)  # within the second: held in the process
    await guard.charge("telegram:2", 10)
    assert int(await redis.get(key)) == 100
    assert (await guard.admit("telegram:1")).message == USER_BUDGET_SPENT  # yet counted
    usage = await guard.usage("telegram:1")  # /status writes first, so it is exact
    assert (usage.user, usage.everyone, usage.user_cost) == (1060 - 10, 1060, 0.75)
    assert int(await redis.get(key)) == 1050
    guard.flush_every = 0.0
    await guard.charge("telegram:1", 1)
    assert int(await redis.get(key)) == 1051
