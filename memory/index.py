"""The memory index's schema and its scoped nearest-neighbour query.

Two vector algorithms: FLAT compares the query with every candidate (exact, cheap to build);
HNSW walks a graph (approximate, costly to build, fast on large candidate sets). The hybrid
policy says how a scope filter meets the vector search: ADHOC_BF computes the distance of each
memory in the filtered scopes (exact, cost grows with the scope), BATCHES walks the HNSW graph
and filters what it finds. `auto` uses ADHOC_BF up to ADHOC_LIMIT memories in the scopes
and BATCHES above (RediSearch's own pick kept ADHOC_BF for a 20k scope in a 25k index, at
15 ms). `bench/bench_memory.py` measures them; the defaults follow its figures.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Protocol

from redisvl.query import VectorQuery
from redisvl.query.filter import Tag
from redisvl.schema import IndexSchema

from agent.protocols import MemoryRecord

Algorithm = Literal["flat", "hnsw"]
HybridPolicy = Literal["auto", "adhoc_bf", "batches"]

ADHOC_LIMIT = 5000  # exact search stays under ~1 ms up to here (bench_memory)
EF_CONSTRUCTION = 100
EF_RUNTIME = 100
FIELDS = [
    "id",
    "text",
    "kind",
    "scope",
    "author",
    "source",
    "origin",
    "created_at",
    "last_used_at",
    "author_name",
    "corrected_at",
]


VECTOR = "embedding"  # the vector field of the first index; later ones name their own


def schema(
    prefix: str, dims: int, algorithm: Algorithm = "hnsw", name: str = "", vector: str = VECTOR
) -> IndexSchema:
    attrs: dict[str, Any] = {
        "dims": dims,
        "algorithm": algorithm,
        "distance_metric": "cosine",
        "datatype": "float32",
    }
    if algorithm == "hnsw":
        # RediSearch's default candidate list (10) misses true neighbours under a filter;
        # a build list of 100 (default 200) halves indexing time (bench_memory).
        attrs.update(m=16, ef_construction=EF_CONSTRUCTION, ef_runtime=EF_RUNTIME)
    return IndexSchema.from_dict(
        {
            "index": {
                "name": name or f"{prefix}:memory",
                "prefix": f"{prefix}:memory:doc",
                "storage_type": "hash",
            },
            "fields": [
                {"name": "text", "type": "text"},
                {"name": "kind", "type": "tag"},
                {"name": "scope", "type": "tag", "attrs": {"separator": "|"}},
                {"name": "author", "type": "tag", "attrs": {"separator": "|"}},
                {"name": "source", "type": "tag", "attrs": {"separator": "|"}},
                {"name": "origin", "type": "tag"},
                {"name": "created_at", "type": "numeric", "attrs": {"sortable": True}},
                {"name": "last_used_at", "type": "numeric", "attrs": {"sortable": True}},
                {"name": vector, "type": "vector", "attrs": attrs},
            ],
        }
    )


def resolve(policy: HybridPolicy, size: int | None) -> str | None:
    """The policy a query names: ADHOC_BF or BATCHES, or None to let RediSearch pick."""
    if policy != "auto":
        return policy
    if size is None:
        return None
    return "adhoc_bf" if size <= ADHOC_LIMIT else "batches"


def nearest_query(
    vector: list[float],
    scopes: list[str],
    k: int,
    policy: HybridPolicy = "auto",
    size: int | None = None,
    author: str | None = None,
    vector_field: str = VECTOR,
) -> VectorQuery:
    """The query for the k memories of these scopes closest to the vector, with
    `vector_distance`; only `author`'s when given.

    `size` is how many memories the scopes hold, when the caller knows (for `auto`)."""
    chosen = resolve(policy, size)
    within = Tag("scope") == scopes
    if author is not None:
        within &= Tag("author") == author
    return VectorQuery(
        vector=vector,
        vector_field_name=vector_field,
        return_fields=FIELDS,
        filter_expression=within,
        num_results=k,
        hybrid_policy=None if chosen is None else chosen.upper(),
    )


def record(doc: dict[str, Any], distance: float | None = None) -> MemoryRecord:
    """A memory as the index returns it, as the agent sees it."""
    return MemoryRecord(
        id=str(doc["id"]).rsplit(":", 1)[-1],
        text=str(doc["text"]),
        kind=doc.get("kind") or "fact",  # type: ignore[arg-type]
        scope=str(doc["scope"]),
        author=str(doc.get("author") or ""),
        source_conversation=str(doc.get("source") or ""),
        created_at=float(doc.get("created_at") or 0),
        last_used_at=float(doc.get("last_used_at") or 0),
        distance=distance,
        origin="extracted" if doc.get("origin") == "extracted" else "remembered",
        author_name=str(doc.get("author_name") or ""),
        corrected_at=float(doc["corrected_at"]) if doc.get("corrected_at") else None,
    )


class Cutoffs(Protocol):
    """Recall's cutoffs (memory.config.MemoryConfig)."""

    @property
    def max_distance(self) -> float: ...
    @property
    def margin(self) -> float: ...
    @property
    def recency_weight(self) -> float: ...
    @property
    def recency_days(self) -> float: ...


def rank(found: list[dict[str, Any]], k: int, now: float, config: Cutoffs) -> list[MemoryRecord]:
    """Cut what is too far (absolutely, or relative to the best match), then order by
    distance with a small bonus for recent use."""
    distances = [float(doc["vector_distance"]) for doc in found]
    if not distances:
        return []
    cutoff = min(config.max_distance, min(distances) + config.margin)
    ranked = []
    for doc, distance in zip(found, distances, strict=True):
        if distance > cutoff:
            continue
        age_days = max(0.0, now - float(doc.get("last_used_at") or 0)) / 86_400
        bonus = config.recency_weight * math.exp(-age_days / config.recency_days)
        ranked.append((distance - bonus, record(doc, distance)))
    ranked.sort(key=lambda pair: pair[0])
    return [memory for _, memory in ranked[:k]]
