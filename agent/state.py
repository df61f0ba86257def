"""A run's durable state: everything needed to resume it in another process.

Pydantic, because the bot stores it in Redis as JSON (`model_dump_json` /
`model_validate_json`) while the run waits for a human; what it waits for is described in
`deferred`.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from agent.deferred import ApprovedPlan, PendingPlan, PendingQuestion, new_id
from agent.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    Usage,
)
from agent.protocols import RunContext

IMAGE_GONE = "[The user shared an image {name}here earlier; it is no longer available.]"
OTHERS_RESULT = (
    "[{tool} ran for another person earlier in this conversation; its result is theirs, so it "
    "is not shown. Call it again if this request needs it.]"
)
PRIVATE_ANSWER = "[An answer given privately to another person; not shown.]"


class RunState(BaseModel):
    run_id: str = Field(default_factory=new_id)
    context: RunContext
    objective: str
    messages: list[Message] = Field(default_factory=list)
    summary: str = ""
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    pending_question: PendingQuestion | None = None
    pending_plan: PendingPlan | None = None
    # results already produced for the open turn (read-only calls that ran before suspending)
    pending_results: list[ToolResultBlock] = Field(default_factory=list)
    approved_plan: ApprovedPlan | None = None
    last_user_text: str = ""  # the latest thing the user said, for recall
    started_at: float = Field(default_factory=time.time)
    errors: list[str] = Field(default_factory=list)
    # The requester who was answered privately because of what a call read
    # (`ApprovalRequired(private=True)`): the history holds what only they may see.
    private_to: str | None = None

    def clone(self) -> RunState:
        """An independent copy; the JSON round trip the session store already relies on is
        several times faster than a deep copy."""
        return RunState.model_validate_json(self.model_dump_json())

    @property
    def is_suspended(self) -> bool:
        return self.pending_question is not None or self.pending_plan is not None

    def open_calls(self) -> list[str]:
        """Tool-use ids of the last assistant turn that have no result yet."""
        if not self.messages or self.messages[-1].role != "assistant":
            return []
        done = {r.tool_use_id for r in self.pending_results}
        return [u.id for u in self.messages[-1].tool_uses if u.id not in done]

    def close_turn(self, results: list[ToolResultBlock]) -> None:
        """Append one user message answering every tool_use of the last assistant turn."""
        by_id = {r.tool_use_id: r for r in [*self.pending_results, *results]}
        uses = self.messages[-1].tool_uses if self.messages else []
        missing = [u.id for u in uses if u.id not in by_id]
        if missing:
            raise ValueError(f"tool uses without a result: {missing}")
        self.messages.append(Message(role="user", content=[by_id[u.id] for u in uses]))
        self.pending_results = []

    def drop_images(self) -> None:
        """Replace images by a note. An image lives only as long as the run it came with, so
        a later run neither resends it to the model nor keeps its bytes in Redis."""
        for index, message in enumerate(self.messages):
            if message.images:
                content: list[ContentBlock] = [
                    TextBlock(text=IMAGE_GONE.format(name=f"{b.name} " if b.name else ""))
                    if isinstance(b, ImageBlock)
                    else b
                    for b in message.content
                ]
                self.messages[index] = Message(role=message.role, content=content)

    def keep_for(self, context: RunContext) -> None:
        """Keep of this history only what `context`'s requester may see.

        Tool results belong to whoever caused them: for anyone else they become a note that
        the tool was used, and so does every answer of a private run. The running summary,
        written from those results, goes too."""
        previous = self.context
        if (previous.platform, previous.user_id) == (context.platform, context.user_id):
            return
        names = {use.id: use.name for message in self.messages for use in message.tool_uses}
        for index, message in enumerate(self.messages):
            content: list[ContentBlock] = []
            for block in message.content:
                if isinstance(block, ThinkingBlock | RedactedThinkingBlock):
                    continue  # the model's thoughts on what the other person's calls read
                if isinstance(block, ToolResultBlock):
                    tool = names.get(block.tool_use_id, "A tool")
                    block = ToolResultBlock(
                        tool_use_id=block.tool_use_id, content=OTHERS_RESULT.format(tool=tool)
                    )
                elif (
                    self.private_to and message.role == "assistant" and isinstance(block, TextBlock)
                ):
                    block = TextBlock(text=PRIVATE_ANSWER)
                content.append(block)
            # rebuilt without `context` too: the memories recalled for the other person
            self.messages[index] = Message(role=message.role, content=content)
        self.summary = ""
        self.private_to = None

    def abandon(self, note: str) -> None:
        """Give every open call a result saying why it never ran, and drop what was pending
        (images included)."""
        open_ids = self.open_calls()
        if open_ids:
            self.close_turn(
                [ToolResultBlock(tool_use_id=i, content=note, is_error=True) for i in open_ids]
            )
        self.pending_question = None
        self.pending_plan = None
        self.pending_results = []
        self.drop_images()
