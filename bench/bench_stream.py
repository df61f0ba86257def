"""Streaming: the model's first token → the first visible text in the chat, and API calls per answer.

One in-process runtime on a throwaway Redis Stack; Anthropic (server-sent events), Telegram
and Slack are the local fakes, driven by the real SDKs. Each of 50 conversations sends its
next objective once the previous answer has landed. Two model streams: zero latency (the
whole answer at once: what Parley itself adds) and paced (about 2 s of writing, where the
throttle bounds the platform calls). Places: a Telegram private chat (drafts), a Telegram
group (one message edited as it grows) and a Slack thread (chat.startStream/append/stop).
The fakes share the event loop with the runtime, so the figures include their work too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from adapters.base import Actor, ChatAdapter, ConversationKey, InboundMessage
from adapters.slack import SlackAdapter, SlackConfig
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.llm.anthropic import AnthropicModel
from bench.support import percentile, throwaway_redis
from bot.config import Settings
from tests.bot.harness import Harness, running
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic, last_user_text
from tests.fakes.server import FakeServer
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

CONVERSATIONS = 50
PER_CONVERSATION = 2
INTERVAL = 0.5  # PARLEY_STREAM_INTERVAL for the bench
BODY = " ".join(f"word{i}" for i in range(120))  # about 1,000 characters
PACED = 0.016  # seconds between 8-character deltas: ~2 s of writing
TIME_LIMIT = 240.0
TARGET_P50 = 0.050
_ids = itertools.count(1)


@dataclass(frozen=True)
class Place:
    name: str
    methods: tuple[str, ...]  # the platform calls that show or deliver an answer

    def conversation(self, index: int) -> ConversationKey:
        if self.name == "slack-thread":
            return ConversationKey(
                platform="slack",
                chat_id="CBENCH",
                thread_id=f"1700000000.{index:06d}",
                team_id="T1",
            )
        chat = 10_000 + index if self.name == "telegram-private" else -(10_000 + index)
        return ConversationKey(platform="telegram", chat_id=str(chat))


PLACES = [
    Place("telegram-private", ("sendMessageDraft", "sendMessage")),
    Place("telegram-group", ("sendMessage", "editMessageText")),
    Place("slack-thread", ("chat.startStream", "chat.appendStream", "chat.stopStream")),
]


def settings() -> Settings:
    return Settings.load(
        env_file=None,
        runtime={"PARLEY_WORKER_CONCURRENCY": CONVERSATIONS, "PARLEY_LOCK_LEASE": 10},
        limits={"PARLEY_RATE_LIMIT_PER_MINUTE": 1000},
        streaming={"PARLEY_STREAM_INTERVAL": INTERVAL},
    )


@contextlib.asynccontextmanager
async def platform(place: Place) -> AsyncIterator[tuple[FakeTelegram | FakeSlack, ChatAdapter]]:
    if place.name.startswith("telegram"):
        telegram = FakeTelegram()
        async with telegram:
            adapter = TelegramAdapter(
                config=TelegramConfig(token=telegram.token, api_url=telegram.url)
            )
            await adapter.initialize()
            try:
                yield telegram, adapter
            finally:
                await adapter.stop()
    else:
        slack = FakeSlack()
        async with slack:
            slack_adapter = SlackAdapter(
                config=SlackConfig(bot_token="xoxb-bench", api_url=slack.api_url)
            )
            await slack_adapter.initialize()
            yield slack, slack_adapter


def visible(fake: FakeServer, place: Place) -> list[tuple[str, float]]:
    """(text shown, when) for every call that put answer text on screen."""
    out = []
    for recorded in fake.requests:
        method = recorded.path.rsplit("/", 1)[-1]
        if method not in place.methods or not isinstance(recorded.body, dict):
            continue
        body = recorded.body
        text = str(body.get("text") or body.get("markdown_text") or "")
        for chunk in body.get("chunks") or []:
            text += str(chunk.get("text") or "")
        out.append((text, recorded.received_at))
    return out


def delivered(fake: FakeTelegram | FakeSlack, key: ConversationKey, whole: str) -> bool:
    if isinstance(fake, FakeSlack):
        return any(p.text == whole and not p.streaming for p in fake.in_channel(key.chat_id))
    return any(p.text == whole for p in fake.chat(int(key.chat_id)))


async def conversation(
    harness: Harness, fake: FakeTelegram | FakeSlack, place: Place, index: int
) -> None:
    key = place.conversation(index)
    for turn in range(PER_CONVERSATION):
        tag = f"c{index}m{turn}"
        event = InboundMessage(
            event_id=f"bench:{next(_ids)}",
            conversation=key,
            actor=Actor(platform=key.platform, user_id=f"U{index}", team_id=key.team_id),
            text=tag,
            is_direct=place.name == "telegram-private",
        )
        await harness.submit(event)
        whole = f"[{tag}] {BODY}"
        deadline = time.monotonic() + 60
        while True:
            if delivered(fake, key, whole):
                break
            if failed(fake, key) or time.monotonic() > deadline:
                FAILED.append(tag)
                break
            await asyncio.sleep(0.005)


FAILED: list[str] = []


def failed(fake: FakeTelegram | FakeSlack, key: ConversationKey) -> bool:
    """Parley told the user something went wrong instead of answering."""
    if isinstance(fake, FakeSlack):
        texts = [p.text for p in fake.in_channel(key.chat_id)]
    else:
        texts = [p.text for p in fake.chat(int(key.chat_id))]
    return any(t.startswith("Sorry") for t in texts)


SETUP_CALLS = ("getMe", "setMyCommands", "auth.test")


async def measure(redis: aioredis.Redis, place: Place, pace: float) -> dict[str, float]:
    hosted = FakeAnthropic()
    async with hosted, platform(place) as (fake, adapter):

        def answer(body: dict[str, Any]) -> fa.Item:
            return fa.streamed(f"[{last_user_text(body)}] {BODY}", pace=pace, chunk=8)

        hosted.responder = answer
        model = AnthropicModel(api_key="sk-bench", model="claude-test", base_url=hosted.url)
        try:
            async with running(
                redis,
                model,  # type: ignore[arg-type]
                adapter=adapter,  # type: ignore[arg-type]
                config=settings(),
            ) as harness:
                async with asyncio.timeout(TIME_LIMIT):
                    await asyncio.gather(
                        *(conversation(harness, fake, place, i) for i in range(CONVERSATIONS))
                    )
                    await harness.settle(within=60)
        finally:
            await model.close()
    shown = visible(fake, place)
    latencies = []
    for tag, first_token in hosted.first_tokens:
        times = [at for text, at in shown if text.startswith(f"[{tag}]")]
        if times:
            latencies.append(min(times) - first_token)
    answers = len(hosted.first_tokens)
    methods = [r.path.rsplit("/", 1)[-1] for r in fake.requests]
    streaming = sum(1 for m in methods if m in place.methods)
    every = sum(1 for m in methods if m not in SETUP_CALLS)
    return {
        "answers": answers,
        "missing": answers - len(latencies),
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 0.95),
        "stream_calls": streaming / answers,
        "all_calls": every / answers,
    }


async def main() -> None:
    ok = True
    zero_latency: list[float] = []
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url)
        try:
            for pace in (0.0, PACED):
                for place in PLACES:
                    await redis.flushall()
                    m = await measure(redis, place, pace)
                    label = "zero-latency" if pace == 0 else "paced ~2 s"
                    print(
                        f"{place.name:17s} {label:12s} answers {m['answers']:4.0f}  "
                        f"first token -> visible p50 {m['p50'] * 1000:6.1f} ms "
                        f"p95 {m['p95'] * 1000:6.1f} ms  platform calls/answer "
                        f"{m['stream_calls']:.1f} showing+delivering, {m['all_calls']:.1f} in all",
                        flush=True,
                    )
                    if m["missing"]:
                        print(f"  {m['missing']:.0f} answers showed no text", flush=True)
                        ok = False
                    if FAILED:
                        print(f"  {len(FAILED)} objectives not answered: {FAILED[:5]}", flush=True)
                        FAILED.clear()
                        ok = False
                    if pace == 0:
                        zero_latency.append(m["p50"])
        finally:
            await redis.aclose()
    worst = max(zero_latency)
    ok = ok and worst <= TARGET_P50
    print(f"target: p50 <= {TARGET_P50 * 1000:.0f} ms at {CONVERSATIONS} concurrent conversations")
    print(f"BENCH stream p50_ms={worst * 1000:.1f} conversations={CONVERSATIONS} ok={ok}")
