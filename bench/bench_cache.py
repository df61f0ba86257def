"""Prompt caching in a long thread: the share of each step's prompt read from the cache.

A 50-turn thread (about 70-token questions, 200-token answers, five recalled memories that
change with every question) runs through the real agent loop and Anthropic SDK against the
fake Messages API, whose usage accounting follows the API's caching rules. Reported: the
cache-read share of input tokens per step, its minimum after the second step, and the
estimated cost of the thread with and without caching at Sonnet 4.5 prices.
"""

from __future__ import annotations

import random
import statistics
import time

from agent.builtin_tools import builtin_registry
from agent.llm.anthropic import AnthropicModel
from agent.llm.usage import estimate_cost
from agent.loop import Agent
from agent.messages import Usage
from agent.protocols import MemoryRecord, RunContext
from agent.state import RunState
from bench.support import bench_line
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic

TURNS = 50
PRICES = {"claude-sonnet-4-6": (3.0, 15.0)}
CONTEXT = RunContext(conversation_id="c", platform="slack", user_id="U1", chat_id="D1")


class QueryRecall:
    """Five memories that depend on the query, as a vector index's would."""

    async def recall(
        self, query: str, context: RunContext, k: int | None = None
    ) -> list[MemoryRecord]:
        rng = random.Random(query)
        now = time.time()
        return [
            MemoryRecord(
                id=f"m{rng.randrange(10_000)}",
                text=f"the user's project {rng.randrange(100)} ships on day {rng.randrange(30)}",
                kind="fact",
                scope=context.user_scope,
                author=context.user_id,
                source_conversation="c",
                created_at=now,
                last_used_at=now,
            )
            for _ in range(k or 5)
        ]


async def main() -> None:
    rng = random.Random(1)
    async with FakeAnthropic() as hosted:
        hosted.responder = lambda body: fa.text("Answer: " + "details " * 95)
        model = AnthropicModel(api_key="sk-bench", model="claude-sonnet-4-6", base_url=hosted.url)
        agent = Agent(model, builtin_registry(), recall=QueryRecall())
        state: RunState | None = None
        shares: list[float] = []
        total = Usage()
        for turn in range(1, TURNS + 1):
            words = " ".join(rng.choice(["budget", "deploy", "plan", "ship"]) for _ in range(40))
            outcome = await agent.run(f"Question {turn}: {words}?", CONTEXT, history=state)
            state = outcome.state
            usage = outcome.trace.usage
            prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
            shares.append(usage.cache_read_tokens / prompt)
            total = total + usage
        await model.close()
    uncached = Usage(
        input_tokens=total.input_tokens + total.cache_read_tokens + total.cache_write_tokens,
        output_tokens=total.output_tokens,
    )
    cost = estimate_cost(PRICES, "claude-sonnet-4-6", total)
    cost_without = estimate_cost(PRICES, "claude-sonnet-4-6", uncached)
    after_second = shares[2:]
    print(f"{TURNS}-turn thread, last prompt {prompt:,} tokens")
    print(
        "cache-read share per step: "
        + " ".join(f"{s:.2f}" for s in shares[:6])
        + f" … {shares[-1]:.2f}; after the 2nd: min {min(after_second):.2f}, "
        f"median {statistics.median(after_second):.2f}"
    )
    print(f"estimated cost of the thread: ${cost:.3f} (without caching ${cost_without:.3f})")
    bench_line(
        "cache",
        ok=min(after_second) >= 0.8,
        min_read_share=f"{min(after_second):.3f}",
        goal=">=0.80",
        median_read_share=f"{statistics.median(after_second):.2f}",
        cost_ratio=f"{cost / cost_without:.2f}",
    )
