"""What the loop recalls before each think step.

The query follows the work: the objective, the latest user turn and the latest tool
observation (bounded), so a step that just read a calendar recalls what matters about it.
When the query is the same as the previous step's, the previous memories are reused: no
second embedding, no second search.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from agent.protocols import MemoryRecord, Recall
from agent.state import RunState

log = logging.getLogger(__name__)

OBSERVATION_CHARS = 1000  # of the latest tool results, in the query


def latest_observation(state: RunState) -> str:
    """The tool results the model is about to read, if the last turn was a tool turn."""
    for message in reversed(state.messages):
        if message.role != "user":
            continue
        results = [block.content for block in message.tool_results if not block.is_error]
        return "\n".join(results)[:OBSERVATION_CHARS]
    return ""


def recall_query(state: RunState) -> str:
    parts = [state.objective]
    if state.last_user_text and state.last_user_text != state.objective:
        parts.append(state.last_user_text)
    observation = latest_observation(state)
    if observation:
        parts.append(observation)
    return "\n".join(parts)


@dataclass
class StepRecall:
    """Recall for one run segment, remembering the last query and what it found."""

    recall: Recall | None
    k: int
    _query: str | None = field(default=None, init=False)
    _found: list[MemoryRecord] = field(default_factory=list, init=False)

    async def __call__(self, state: RunState) -> list[MemoryRecord]:
        if self.recall is None:
            return []
        query = recall_query(state)
        if query == self._query:
            return self._found
        try:
            found = await self.recall.recall(query, state.context, k=self.k)
        except Exception:  # memory is a help, not a dependency: think without it
            log.warning("run %s: recall failed", state.run_id, exc_info=True)
            return []
        self._query, self._found = query, found
        return found
