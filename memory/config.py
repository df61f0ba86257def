"""The memory store's settings: recall's cutoffs, the caps per scope kind, the index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.index import Algorithm, HybridPolicy


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """Distances that depend on the embedding model: each model spreads its cosines
    differently (MiniLM's unrelated sentences sit ~0.7-1.0 apart, multilingual-e5's
    0.1-0.25), so each embedder brings the cutoffs bench/bench_recall.py picked for it."""

    max_distance: float
    margin: float
    generic_distance: float
    merge_distance: float


# all-MiniLM-L6-v2 on the English set (bench_recall); also what an unmeasured remote model
# starts with until its operator measures it.
MINILM = Tuning(max_distance=0.85, margin=0.125, generic_distance=0.4, merge_distance=0.1)


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """How recall ranks and cuts, what each scope may hold, and how the index is built.

    The recall defaults are what bench/bench_recall.py picks on the labelled set in
    tests/memory/eval.
    """

    k: int = 5
    max_distance: float = 0.85  # a memory farther than this from the query is not relevant
    margin: float = 0.125  # ... nor one this much farther than the best match
    recency_weight: float = 0.0  # distance forgiven to a just-used memory (the set: no gain)
    recency_days: float = 30.0
    # This close to "what do you know about me?": list instead. The set's generic questions
    # measure at most 0.36, its other questions at least 0.50.
    generic_distance: float = 0.4
    merge_distance: float = 0.1
    max_per_user: int = 1000
    max_per_chat: int = 10_000
    max_per_team: int = 100_000
    algorithm: Algorithm = "hnsw"
    hybrid_policy: HybridPolicy = "auto"

    @classmethod
    def tuned(cls, tuning: Tuning, **overrides: Any) -> MemoryConfig:
        """The defaults with this embedder's distances, then the operator's overrides."""
        return cls(
            **{
                "max_distance": tuning.max_distance,
                "margin": tuning.margin,
                "generic_distance": tuning.generic_distance,
                "merge_distance": tuning.merge_distance,
                **overrides,
            }
        )

    def limit_for(self, scope: str) -> int:
        kind = scope.split(":", 1)[0]
        return {"user": self.max_per_user, "chat": self.max_per_chat}.get(kind, self.max_per_team)
