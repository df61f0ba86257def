"""Streaming: the model's first token → the first visible text in the chat, and API calls per answer.

One in-process runtime on a throwaway Redis Stack; Anthropic (server-sent events), Telegram
and Slack are the local fakes, run in a process of their own (`bench.stream_fakes`) and
driven by the real SDKs. Each of 50 conversations sends its next objective once the previous
answer has landed — back to back, and pausing a random 0–1 s first (a person reading; as in
bench_service, back to back at 50 conversations is a load test more than a latency one). Two
model streams: zero latency (the whole answer at once: what Parley itself adds) and paced
(about 2 s of writing, where the throttle bounds the platform calls).
Places: a Telegram private chat (drafts), a Telegram group (one message edited as it grows)
and a Slack thread (chat.startStream / appendStream / stopStream). "Visible" is when the
fake platform received the call that showed the answer's first text: with a zero-latency
model that is the one ordinary message the answer arrives as (it is written well within
`PARLEY_STREAM_FIRST_SHOW`); a paced answer shows first once that hold is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import statistics
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from adapters.base import (
    Actor,
    ConversationKey,
    InboundMessage,
)
from adapters.platform import ChatAdapter
from adapters.slack import SlackAdapter, SlackConfig
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.llm.anthropic import AnthropicModel
from bench.support import percentile, throwaway_redis
from bot.config import Settings
from tests.bot.harness import Harness, running

CONVERSATIONS = 50
PER_CONVERSATION = 2
INTERVAL = 0.5  # PARLEY_STREAM_INTERVAL for the bench
PACED = 0.016  # seconds between 8-character deltas: ~2 s of writing
TIME_LIMIT = 240.0
TARGET_P50 = 0.050
# (model pace, mean pause before each message)
RUNS = [(0.0, 0.0), (0.0, 0.5), (PACED, 0.5)]
_ids = itertools.count(1)


@dataclass(frozen=True)
class Place:
    name: str
    methods: tuple[str, ...]  # the platform calls that show or deliver an answer

    def conversation(self, index: int) -> ConversationKey:
        if self.name == "slack-thread":
            thread = f"1700000000.{index:06d}"
            return ConversationKey(
                platform="slack", chat_id="CBENCH", thread_id=thread, team_id="T1"
            )
        chat = 10_000 + index if self.name == "telegram-private" else -(10_000 + index)
        return ConversationKey(platform="telegram", chat_id=str(chat))


PLACES = [
    Place("telegram-private", ("sendMessageDraft", "sendMessage")),
    Place("telegram-group", ("sendMessage", "editMessageText")),
    Place(
        "slack-thread",
        ("chat.startStream", "chat.appendStream", "chat.stopStream", "chat.postMessage"),
    ),
]
SETUP_CALLS = ("getMe", "setMyCommands", "auth.test")


def settings() -> Settings:
    return Settings.load(
        env_file=None,
        runtime={"PARLEY_WORKER_CONCURRENCY": CONVERSATIONS, "PARLEY_LOCK_LEASE": 10},
        limits={"PARLEY_RATE_LIMIT_PER_MINUTE": 1000},
        streaming={"PARLEY_STREAM_INTERVAL": INTERVAL},
    )


@contextlib.asynccontextmanager
async def fakes(pace: float) -> AsyncIterator[dict[str, str]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.stream_fakes",
        str(pace),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(30):
            urls: dict[str, str] = json.loads(await process.stdout.readline())
        yield urls
    finally:
        process.stdin.close()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def adapter_for(place: Place, urls: dict[str, str]) -> ChatAdapter:
    if place.name.startswith("telegram"):
        telegram = TelegramAdapter(
            config=TelegramConfig(token=urls["token"], api_url=urls["telegram"])
        )
        await telegram.initialize()
        return telegram
    slack = SlackAdapter(config=SlackConfig(bot_token="xoxb-bench", api_url=urls["slack"]))
    await slack.initialize()
    return slack


async def conversation(
    harness: Harness,
    http: aiohttp.ClientSession,
    anthropic: str,
    place: Place,
    index: int,
    pause: float,
) -> int:
    """Objectives sent one after another; returns how many were not answered in full."""
    key = place.conversation(index)
    missed = 0
    for turn in range(PER_CONVERSATION):
        tag = f"c{index}m{turn}"
        if pause:
            await asyncio.sleep(random.uniform(0, 2 * pause))
        event = InboundMessage(
            event_id=f"bench:{next(_ids)}",
            conversation=key,
            actor=Actor(platform=key.platform, user_id=f"U{index}", team_id=key.team_id),
            text=tag,
            is_direct=place.name == "telegram-private",
        )
        await harness.submit(event)
        async with http.get(f"{anthropic}/_bench/wait", params={"tag": tag}) as response:
            missed += not (await response.json())["done"]
    return missed


async def measure(
    redis: aioredis.Redis, place: Place, pace: float, pause: float
) -> dict[str, float]:
    async with fakes(pace) as urls, aiohttp.ClientSession() as http:
        adapter = await adapter_for(place, urls)
        model = AnthropicModel(api_key="sk-bench", model="claude-test", base_url=urls["anthropic"])
        try:
            async with running(
                redis,
                model,  # type: ignore[arg-type]
                adapter=adapter,  # type: ignore[arg-type]
                config=settings(),
            ) as harness:
                async with asyncio.timeout(TIME_LIMIT):
                    missed = await asyncio.gather(
                        *(
                            conversation(harness, http, urls["anthropic"], place, i, pause)
                            for i in range(CONVERSATIONS)
                        )
                    )
                    await harness.settle(within=60)
        finally:
            await model.close()
            await adapter.stop()
        async with http.get(f"{urls['anthropic']}/_bench/dump") as response:
            dump: dict[str, Any] = await response.json()
    calls = [(m, text, at) for m, text, at in dump["calls"] if m not in SETUP_CALLS]
    latencies = []
    for tag, first_token in dump["first_tokens"]:
        times = [at for m, text, at in calls if m in place.methods and text.startswith(f"[{tag}]")]
        if times:
            latencies.append(min(times) - first_token)
    answers = len(dump["first_tokens"])
    return {
        "answers": answers,
        "missed": sum(missed) + answers - len(latencies),
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 0.95),
        "stream_calls": sum(1 for m, _, _ in calls if m in place.methods) / answers,
        "all_calls": len(calls) / answers,
    }


async def main() -> None:
    ok = True
    zero_latency: list[float] = []
    with throwaway_redis() as url:
        # gateway and workers share this client here, with 50 submitters besides: a larger
        # pool than redis-py's default 100, which the bench itself would exhaust
        redis = aioredis.Redis.from_url(url, max_connections=400)
        try:
            for pace, pause in RUNS:
                for place in PLACES:
                    await redis.flushall()
                    m = await measure(redis, place, pace, pause)
                    label = "zero-latency" if pace == 0 else "paced ~2 s"
                    label += ", pausing" if pause else ", back to back"
                    print(
                        f"{place.name:17s} {label:27s} answers {m['answers']:4.0f}  "
                        f"first token -> visible p50 {m['p50'] * 1000:6.1f} ms "
                        f"p95 {m['p95'] * 1000:6.1f} ms  platform calls/answer "
                        f"{m['stream_calls']:.1f} showing+delivering, {m['all_calls']:.1f} in all",
                        flush=True,
                    )
                    if m["missed"]:
                        print(f"  {m['missed']:.0f} answers not shown in full", flush=True)
                        ok = False
                    if pace == 0 and pause:
                        zero_latency.append(m["p50"])
        finally:
            await redis.aclose()
    worst = max(zero_latency)
    ok = ok and worst <= TARGET_P50
    print(
        f"target: p50 <= {TARGET_P50 * 1000:.0f} ms at {CONVERSATIONS} concurrent conversations "
        "(zero-latency model, pausing; the worst place counts)"
    )
    print(f"BENCH stream p50_ms={worst * 1000:.1f} conversations={CONVERSATIONS} ok={ok}")
