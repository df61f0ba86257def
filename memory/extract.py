"""Optional end-of-run extraction: the model names durable facts worth remembering.

What it keeps is stored as "extracted", so in a full scope it may only displace its own
earlier picks; the bot tells the user what it kept, with a Forget button each. The model is
reached through `Completion`, which the bot wires to its chat model, so memory depends on
no model code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Protocol

from agent.protocols import MemoryFull, MemoryRecord, MemoryStore, RunContext

log = logging.getLogger(__name__)

PROMPT = """\
You maintain an assistant's long-term memory. From the conversation below, list the durable \
facts and preferences about the user or their team that will still matter in a month \
(names, roles, preferences, standing arrangements). Skip anything transient, anything the \
assistant said about itself, and secrets such as passwords or keys. Answer with a JSON \
array of short sentences, e.g. ["Ana prefers meetings after 10am"], or [] if nothing."""


class Completion(Protocol):
    """Answers one prompt under a system prompt with text; None when no model can."""

    async def __call__(self, system: str, prompt: str, max_tokens: int) -> str | None: ...


class TranscriptMessage(Protocol):
    """A message of the conversation, as far as extraction reads it."""

    @property
    def role(self) -> str: ...

    @property
    def text(self) -> str: ...


class FactExtractor:
    def __init__(self, complete: Completion, store: MemoryStore, *, max_facts: int = 5) -> None:
        self.complete = complete
        self.store = store
        self.max_facts = max_facts

    async def extract(
        self, messages: Sequence[TranscriptMessage], context: RunContext
    ) -> list[MemoryRecord]:
        if not context.asked:
            return []  # a trigger's run: its text is a webhook's, not the person's words
        transcript = "\n".join(f"{m.role}: {m.text}" for m in messages if m.text.strip())[-12_000:]
        if not transcript:
            return []
        answer = await self.complete(PROMPT, transcript, 400)
        if answer is None:
            log.warning("fact extraction skipped: the model is unavailable")
            return []
        kept = []
        for fact in parse_facts(answer)[: self.max_facts]:
            try:
                # Nobody approved these: they stay the requester's own, never a shared chat's
                # (where anyone's text may be what suggested them).
                kept.append(
                    await self.store.remember(fact, context, origin="extracted", share="private")
                )
            except MemoryFull:
                break  # full of remembered facts: nothing of ours to make room with
        return kept


def parse_facts(text: str) -> list[str]:
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return []
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return []
    return [str(item).strip() for item in data if isinstance(item, str) and item.strip()]
