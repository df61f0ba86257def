"""Metrics, health and readiness, logs without secrets, rate limits and budgets."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from agent.llm.usage import MeteredModel, close_model
from agent.messages import ChatRequest, ChatResponse, Usage
from bot.config import Settings
from bot.conversation.limits import GLOBAL_BUDGET_SPENT, RATE_LIMITED, USER_BUDGET_SPENT, Limits
from bot.ops.http import HttpServer
from bot.ops.logs import configure_logging, log_context
from bot.runtime.worker import GROUP
from bot.wiring.app import _redis_check
from bot.wiring.models import build_chat_model
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running, settings
from tests.bot.recording import dm, message
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@contextlib.asynccontextmanager
async def scraper(redis: aioredis.Redis) -> AsyncIterator[Callable[[], Awaitable[Samples]]]:
    """The internal listener, as Prometheus sees it: each call scrapes `/metrics` once."""
    server = HttpServer("127.0.0.1", 0)
    server.add_check("redis", _redis_check(redis))
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:

            async def scrape() -> Samples:
                url = f"http://127.0.0.1:{server.metrics_port}/metrics"
                async with http.get(url) as response:
                    assert response.status == 200
                    text = await response.text()
                return {
                    (sample.name, frozenset(sample.labels.items())): sample.value
                    for family in text_string_to_metric_families(text)
                    for sample in family.samples
                }

            yield scrape
    finally:
        await server.stop()


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """The registry is process-wide, so a test reads what its own traffic added."""
    return value(after, name, **labels) - value(before, name, **labels)


async def until(
    scrape: Callable[[], Awaitable[Samples]], ready: Callable[[Samples], bool], within: float = 20
) -> Samples:
    """Scrape until `ready` holds; gauges are sampled by background loops."""
    deadline = time.monotonic() + within
    while True:
        samples = await scrape()
        if ready(samples) or time.monotonic() > deadline:
            return samples
        await asyncio.sleep(0.05)


async def test_health_and_readiness(redis: aioredis.Redis) -> None:
    server = HttpServer("127.0.0.1", 0)
    server.add_check("redis", _redis_check(redis))
    await server.start()
    base = f"http://127.0.0.1:{server.metrics_port}"
    broken = aioredis.Redis(port=1)
    try:
        async with aiohttp.ClientSession() as http:
            health = await http.get(f"{base}/healthz")
            ready = await http.get(f"{base}/readyz")
            assert health.status == 200 and ready.status == 200
            assert (await ready.json())["checks"]["redis"]["ok"] is True
            server.add_check("broken", _redis_check(broken))
            not_ready = await http.get(f"{base}/readyz")
            assert not_ready.status == 503
            assert (await not_ready.json())["checks"]["broken"]["ok"] is False
    finally:
        await server.stop()
        await broken.aclose()


async def test_two_messages_count_runs_steps_tools_deliveries_and_model_calls(
    redis: aioredis.Redis,
) -> None:
    script = [turn(call("calculator", expression="2+2")), reply("4"), reply("hi again")]
    model = MeteredModel(ScriptedModel(script), {"scripted-1": (3.0, 15.0)})
    chat = dm()
    async with scraper(redis) as scrape, running(redis, model) as harness:
        before = await scrape()
        await harness.submit(message(chat, "what is 2+2?"))
        await harness.settle()
        await harness.submit(message(chat, "hello"))
        await harness.settle()
        after = await scrape()
    assert harness.adapter.texts(chat) == ["4", "hi again"]
    tg = {"platform": "telegram"}
    assert delta(before, after, "parley_messages_in_total", kind="message", **tg) == 2
    assert delta(before, after, "parley_runs_total", outcome="finished") == 2
    assert delta(before, after, "parley_run_seconds_count") == 2
    assert delta(before, after, "parley_run_steps_count") == 2
    assert delta(before, after, "parley_run_steps_sum") == 3  # two think steps, then one
    assert delta(before, after, "parley_tool_calls_total", tool="calculator", result="ok") == 1
    assert delta(before, after, "parley_queue_lag_seconds_count") == 2
    assert delta(before, after, "parley_deliveries_total", result="sent", **tg) == 2
    assert delta(before, after, "parley_deliveries_total", result="failed", **tg) == 0
    scripted = {"provider": "scripted"}
    assert delta(before, after, "parley_model_calls_total", result="ok", **scripted) == 3
    assert delta(before, after, "parley_model_latency_seconds_count", **scripted) == 3
    assert delta(before, after, "parley_model_tokens_total", kind="input", **scripted) == 30
    assert delta(before, after, "parley_model_tokens_total", kind="output", **scripted) == 15
    cost = delta(before, after, "parley_model_cost_dollars_total", model="scripted-1", **scripted)
    assert cost == pytest.approx(3 * (10 * 3.0 + 5 * 15.0) / 1_000_000)


async def test_a_repeated_event_is_counted_as_dropped_not_as_a_message(
    redis: aioredis.Redis,
) -> None:
    event = message(dm(), "hello")
    async with scraper(redis) as scrape, running(redis, ScriptedModel([reply("hi")])) as harness:
        before = await scrape()
        assert await harness.submit(event)
        assert not await harness.submit(event)
        await harness.settle()
        after = await scrape()
    tg = {"platform": "telegram"}
    assert delta(before, after, "parley_messages_in_total", kind="message", **tg) == 1
    assert delta(before, after, "parley_messages_dropped_total", reason="duplicate", **tg) == 1
    assert delta(before, after, "parley_runs_total", outcome="finished") == 1


async def test_pending_decisions_gauge_counts_a_waiting_question(redis: aioredis.Redis) -> None:
    question = {"kind": "question"}
    ask = turn(call("ask_user", question="Which size?", options=["Small", "Large"]))
    chat = dm()
    async with scraper(redis) as scrape:
        async with running(redis, ScriptedModel([ask])) as harness:
            # each runtime samples the gauges when it starts: nothing waits yet
            samples = await until(
                scrape, lambda s: value(s, "parley_pending_decisions", **question) == 0
            )
            assert value(samples, "parley_pending_decisions", **question) == 0
            before = samples
            await harness.submit(message(chat, "a coffee please"))
            await harness.settle()
        assert "Which size?" in harness.adapter.texts(chat)[-1]
        async with running(redis, ScriptedModel([])):
            after = await until(
                scrape, lambda s: value(s, "parley_pending_decisions", **question) == 1
            )
    assert value(after, "parley_pending_decisions", **question) == 1
    assert delta(before, after, "parley_runs_total", outcome="awaitinganswer") == 1


class Gated:
    """A model whose answers wait for the test to open the gate."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.gate = asyncio.Event()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        await self.gate.wait()
        return await self.inner.complete(request)


async def test_queue_length_gauge_shows_what_no_worker_has_read(redis: aioredis.Redis) -> None:
    # One slot and answers held back: the worker stops reading once it holds as many
    # conversations as it takes on, and the rest stay queued, unread by any worker.
    model = Gated(ScriptedModel([reply(f"answer {n}") for n in range(8)]))
    config = settings(PARLEY_WORKER_CONCURRENCY=1)
    chats = [dm(str(1000 + n)) for n in range(8)]

    async def unread() -> int:
        groups = await redis.xinfo_groups(harness.runtime.keys.inbox)
        return sum(int(g["lag"] or 0) for g in groups if g["name"] in (GROUP, GROUP.encode()))

    async with scraper(redis) as scrape:
        async with running(redis, model, config=config) as harness:
            for chat in chats:
                await harness.submit(message(chat, "hello", user=chat.chat_id))
            deadline = time.monotonic() + 20
            while True:
                queued, lag = value(await scrape(), "parley_queue_length"), await unread()
                if 0 < queued == lag or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert 0 < queued == lag < len(chats)
            model.gate.set()
            await harness.settle(within=30)
            drained = await until(scrape, lambda s: value(s, "parley_queue_length") == 0)
        assert value(drained, "parley_queue_length") == 0
    assert all(harness.adapter.texts(chat) for chat in chats)


async def test_a_forced_fallback_counts_the_failure_the_fallback_and_the_breaker(
    redis: aioredis.Redis,
) -> None:
    # The shipped model stack (bot/wiring/models.py) against the fake providers.
    async with FakeAnthropic() as hosted, FakeOllama(models=["qwen2.5:7b"]) as local:
        hosted.script(fa.error(529))
        local.responder = lambda body: fo.reply("from ollama")
        config = Settings.load(
            env_file=None,
            anthropic={
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": hosted.url,
                "ANTHROPIC_MODEL": "claude-test",
            },
            ollama={"OLLAMA_HOST": local.url, "OLLAMA_MODEL": "qwen2.5:7b"},
            llm={"PARLEY_BREAKER_FAILURES": 1},
            runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2},
        )
        model = build_chat_model(config, redis)
        chat = dm()
        try:
            async with (
                scraper(redis) as scrape,
                running(redis, model, config=config) as harness,
            ):
                before = await scrape()
                await harness.submit(message(chat, "hello", user=chat.chat_id))
                await harness.settle()
                after = await scrape()
        finally:
            await close_model(model)
    assert harness.adapter.texts(chat) == ["from ollama"]
    hosted_calls = {"provider": "anthropic"}
    assert delta(before, after, "parley_model_fallbacks_total", reason="unavailable") == 1
    assert delta(before, after, "parley_model_calls_total", result="ok", **hosted_calls) == 0
    failed = {"result": "ProviderUnavailable", **hosted_calls}  # the 529, as the agent sees it
    assert delta(before, after, "parley_model_calls_total", **failed) == 1
    assert delta(before, after, "parley_model_calls_total", provider="ollama", result="ok") == 1
    assert value(after, "parley_breaker_state", **hosted_calls) == 2  # open
    assert delta(before, after, "parley_breaker_transitions_total", to="open", **hosted_calls) == 1


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


async def test_tool_names_the_model_makes_up_never_become_metric_labels(
    redis: aioredis.Redis,
) -> None:
    # obeying a message that asks for many made-up tools: each would be a new time series
    invented = [f"exfil_{n}_{'x' * 40}" for n in range(20)]
    script = [turn(*(call(name, q="1") for name in invented)), reply("no such tools")]
    chat = dm()
    async with scraper(redis) as scrape, running(redis, ScriptedModel(script)) as harness:
        before = await scrape()
        await harness.submit(message(chat, "call exfil_0 … exfil_19"))
        await harness.settle()
        after = await scrape()
    assert harness.adapter.texts(chat) == ["no such tools"]
    tools = {labels for name, labels in after if name == "parley_tool_calls_total"}
    assert not any("exfil" in str(labels) for labels in tools)
    assert delta(before, after, "parley_tool_calls_total", tool="unknown", result="invalid") == 20
