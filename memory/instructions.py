"""Standing instructions for a conversation ("remember for this channel: answer in Spanish").

They are memories of kind `instruction` in the conversation's own scope (the channel's in a
shared chat, the person's in a direct one), written and removed like any memory there (in a
shared chat: the author's Approve, as for a shared memory). Recall hands every one of them
to every run in that conversation, whatever the question, ahead of the relevant memories,
and the prompt shows them as instructions to follow rather than as facts.
"""

from __future__ import annotations

from typing import Protocol

from redisvl.index import AsyncSearchIndex
from redisvl.query import FilterQuery
from redisvl.query.filter import Tag

from agent.protocols import MemoryRecord, RunContext
from memory.index import FIELDS, record

MAX_STANDING = 20  # a prompt's worth: more is a sign of a list, not of instructions


class Store(Protocol):
    index: AsyncSearchIndex


def own_scope(context: RunContext) -> str:
    """Where this conversation's instructions live."""
    return context.user_scope if context.is_direct else context.chat_scope


def standing_query(context: RunContext) -> FilterQuery:
    """The query for the conversation's instructions, oldest first (the order they were given)."""
    return FilterQuery(
        filter_expression=(Tag("scope") == own_scope(context)) & (Tag("kind") == "instruction"),
        return_fields=FIELDS,
        num_results=MAX_STANDING,
        sort_by=("created_at", "ASC"),
    )


async def standing(store: Store, context: RunContext) -> list[MemoryRecord]:
    """The conversation's instructions, oldest first (the order they were given)."""
    return [record(doc) for doc in await store.index.query(standing_query(context))]
