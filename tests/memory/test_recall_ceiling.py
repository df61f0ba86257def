"""bench_recall's ceiling: what any acceptance rule can reach with an embedder's ranking (a
fact ranked second is found only after a memory that is not it)."""

from __future__ import annotations

from bench.bench_recall import Ceiling, Step, ceiling


def step(n: int, kind: str, ranked: list[str], target: str | None) -> Step:
    return Step(
        id=f"s{n}",
        type=kind,
        english=True,
        target=target,
        found=[
            {"id": f"memory:doc:{memory}", "vector_distance": 0.1 * (i + 1)}
            for i, memory in enumerate(ranked)
        ],
        newest=[],
        generic_distance=1.0,
        phrased=False,
        text_scores={},
    )


def test_facts_ranked_second_are_irrelevant_steps_the_goal_recall_needs() -> None:
    # 10 facts: 8 ranked first, 1 second, 1 not found; 2 unrelated questions
    steps = [step(n, "fact", [f"f{n}", "x"], f"f{n}") for n in range(8)]
    steps.append(step(8, "fact", ["x", "f8"], "f8"))
    steps.append(step(9, "fact", ["x", "y"], "f9"))
    steps += [step(10 + n, "distractor", ["x"], None) for n in range(2)]
    found = ceiling(steps)
    # recall@5 0.9 needs 9 hits: the one ranked second is one irrelevant step of 12
    assert found == Ceiling(fact_first=0.8, fact_found=0.9, least_irrelevant=1 / 12)
    assert "least_irrelevant_at_goal_recall=0.083" in found.fields()


def test_a_goal_recall_beyond_the_nearest_five_is_unreachable() -> None:
    steps = [step(n, "fact", [f"f{n}"], f"f{n}") for n in range(8)]
    steps += [step(8 + n, "fact", ["x", "y", "z", "v", "w"], f"f{8 + n}") for n in range(2)]
    found = ceiling(steps)
    assert found.fact_found == 0.8 and found.least_irrelevant is None
    assert "least_irrelevant_at_goal_recall=unreachable" in found.fields()
