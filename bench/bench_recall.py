"""Recall quality on the hand-written set in tests/memory/eval: recall@5 on paraphrased
questions, how often an irrelevant memory is injected, and the calibration of the cutoffs.

The set: 25 people in 5 teams, 205 facts (6 per person, 11 per team) each with a question
that paraphrases it, 2 unrelated questions per person and one generic question ("what do
you know about me?"). Each person's recall sees their own facts and their team's (17), as
in a DM. Every memory gets a last-used age of 0–90 days.

Measured per question (one think step): a fact question is a hit when its fact is among
what recall returns; a step injects something irrelevant when recall returns any memory
other than the labelled one (for an unrelated question: any memory at all); a generic
question is answered when recall lists the newest memories. Calibration picks the cutoff,
the relative margin, the recency weight and the generic-question distance on one half of
the questions (alternate ids) and reports the other half with what it picked. The rule:
every generic question listed, then recall@5 of at least 0.9 with the fewest irrelevant
injections (or, if 0.9 is out of reach, the highest recall@5). Recall comes first because a
missed memory is a wrong answer, while an extra one costs a few prompt tokens that the
model is told to ignore when irrelevant.

With the packaged all-MiniLM-L6-v2 both goals cannot be met at once: paraphrases sit at a
median cosine distance of 0.66 from their fact (a quarter beyond 0.75), while unrelated
questions find their nearest memory at 0.72–0.97, so any cutoff that keeps 90% of the
paraphrases also lets unrelated questions and neighbouring facts in.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from agent.protocols import RunContext
from bench.support import throwaway_redis
from memory import Embedder, MemoryConfig, RedisMemoryStore, local_embedder

SET = Path(__file__).parent.parent / "tests" / "memory" / "eval" / "recall_set.jsonl"
K = 5
CANDIDATES = 2 * K
TARGET_RECALL, TARGET_IRRELEVANT = 0.9, 0.10


def load_set(path: Path = SET) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def person(owner: str, team: str) -> RunContext:
    return RunContext(
        conversation_id=f"slack:{team}:D{owner}:-",
        platform="slack",
        user_id=owner,
        chat_id=f"D{owner}",
        team_id=team,
        is_direct=True,
    )


@dataclass(frozen=True, kw_only=True)
class Step:
    """One question, with what recall could choose from."""

    id: str
    type: str  # fact, distractor, generic
    target: str | None  # the fact's memory id
    found: list[dict[str, Any]]  # nearest candidates, with vector_distance
    newest: list[str]  # memory ids of the asker's visible pool, newest first
    generic_distance: float


@dataclass(frozen=True, kw_only=True)
class Score:
    recall_at_5: float
    irrelevant_rate: float
    unrelated_injected: float  # share of unrelated questions that got any memory
    generic_listed: float
    steps: int

    @property
    def ok(self) -> bool:
        return self.recall_at_5 >= TARGET_RECALL and self.irrelevant_rate <= TARGET_IRRELEVANT

    def line(self) -> str:
        return (
            f"recall@5 {self.recall_at_5:.3f}, irrelevant injections {self.irrelevant_rate:.3f} "
            f"of steps (unrelated questions given a memory {self.unrelated_injected:.3f}), "
            f"generic questions listed {self.generic_listed:.3f}, {self.steps} steps"
        )


async def collect(
    redis: aioredis.Redis, embedder: Embedder, rows: list[dict[str, str]]
) -> list[Step]:
    """Store every fact, then gather each question's candidates once (no cutoff yet)."""
    store = await RedisMemoryStore(redis, embedder, config=MemoryConfig(merge_distance=0.0)).open()
    members: dict[str, list[str]] = {}
    for row in rows:
        if row["owner"].startswith("p"):
            members.setdefault(row["team"], []).append(row["owner"])
    memory_of: dict[str, str] = {}
    owner_of: dict[str, str] = {}
    rng = np.random.default_rng(5)
    now = time.time()
    facts = [row for row in rows if row["type"] == "fact"]
    for n, row in enumerate(facts):
        team_fact = row["owner"] == row["team"]
        author = members[row["team"]][0] if team_fact else row["owner"]
        record = await store.remember(
            row["text"], person(author, row["team"]), share="team" if team_fact else "private"
        )
        memory_of[row["id"]] = record.id
        owner_of[record.id] = row["owner"]
        age = float(rng.uniform(0, 90)) * 86_400
        await redis.hset(
            store._key(record.id),
            mapping={"created_at": now - (len(facts) - n), "last_used_at": now - age},
        )
    asked = [row for row in rows if row["type"] != "fact"] + facts
    vectors = await embedder.embed_many([row["question"] for row in asked])
    steps = []
    for row, vector in zip(asked, vectors, strict=True):
        asker = row["owner"] if row["owner"].startswith("p") else members[row["team"]][1]
        context = person(asker, row["team"])
        found = await store.nearest(vector, context.readable_scopes(), CANDIDATES)
        page = await store.list_memories(context, limit=K)
        steps.append(
            Step(
                id=row["id"],
                type=row["type"],
                target=memory_of.get(row["id"]),
                found=found,
                newest=[record.id for record in page.records],
                generic_distance=await store.generic.distance(vector),
            )
        )
    return steps


def score(steps: list[Step], config: MemoryConfig, now: float) -> Score:
    ranker = RedisMemoryStore.__new__(RedisMemoryStore)
    ranker.config = config
    hits = facts = irrelevant = unrelated = unrelated_injected = generic = listed = 0
    for step in steps:
        if config.generic_distance > 0 and step.generic_distance <= config.generic_distance:
            chosen, as_list = step.newest[:K], True
        else:
            chosen = [record.id for record in ranker.rank(step.found, K, now)]
            as_list = False
        if step.type == "generic":
            generic += 1
            listed += as_list
            continue
        if step.type == "fact":
            facts += 1
            hits += step.target in chosen
        else:
            unrelated += 1
            unrelated_injected += bool(chosen)
        irrelevant += any(memory != step.target for memory in chosen)
    return Score(
        recall_at_5=hits / max(1, facts),
        irrelevant_rate=irrelevant / max(1, facts + unrelated),
        unrelated_injected=unrelated_injected / max(1, unrelated),
        generic_listed=listed / max(1, generic),
        steps=facts + unrelated + generic,
    )


def halves(steps: list[Step]) -> tuple[list[Step], list[Step]]:
    ordered = sorted(steps, key=lambda step: step.id)
    return ordered[0::2], ordered[1::2]


def calibrate(steps: list[Step], now: float) -> MemoryConfig:
    """The best cutoffs on these steps, by the rule in the module docstring."""
    best: tuple[float, ...] | None = None
    chosen = MemoryConfig()
    grid = itertools.product(
        [round(0.40 + 0.025 * i, 3) for i in range(21)],  # max distance 0.40 .. 0.90
        [0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 2.0],  # margin (2.0: none)
        [0.0, 0.01, 0.02, 0.05],  # recency weight
        [0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45],  # generic distance (0: off)
    )
    for max_distance, margin, recency, generic in grid:
        config = replace(
            MemoryConfig(),
            max_distance=max_distance,
            margin=margin,
            recency_weight=recency,
            generic_distance=generic,
        )
        result = score(steps, config, now)
        key = (
            result.generic_listed,
            min(result.recall_at_5, TARGET_RECALL),
            -result.irrelevant_rate,
            result.recall_at_5,
        )
        if best is None or key > best:
            best, chosen = key, config
    return chosen


async def evaluate() -> tuple[MemoryConfig, Score, Score, Score]:
    """(picked config, its score on the calibration half, on the report half, and the
    shipped defaults on the report half)."""
    rows = load_set()
    embedder = local_embedder()
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url)
        try:
            steps = await collect(redis, embedder, rows)
        finally:
            await redis.aclose()
    now = time.time()
    tune, report = halves(steps)
    picked = calibrate(tune, now)
    return (
        picked,
        score(tune, picked, now),
        score(report, picked, now),
        score(report, MemoryConfig(), now),
    )


async def main() -> None:
    picked, tuned, reported, defaults = await evaluate()
    print(
        f"picked on half A: max_distance {picked.max_distance}, margin {picked.margin}, "
        f"recency_weight {picked.recency_weight}, generic_distance {picked.generic_distance}"
    )
    print(f"half A (calibration): {tuned.line()}")
    print(f"half B (report):      {reported.line()}")
    print(f"half B, shipped defaults: {defaults.line()}")
    print(
        f"BENCH recall recall_at_5={reported.recall_at_5:.3f} "
        f"irrelevant_rate={reported.irrelevant_rate:.3f} ok={str(reported.ok).lower()}"
    )
