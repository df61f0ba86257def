"""What a run does with a model turn, by why the model stopped (the loop asks `StopReasons.after`).

    end_turn, stop_sequence, tool_use  as they are: the answer, or tools to run
    other                              the same (the provider logged the unknown reason once;
                                       a stream that did not end cleanly never gets here)
    max_tokens                         an answer cut by the output limit is continued, at most
                                       `MAX_CONTINUATIONS` times, then said to be cut; a tool
                                       call cut midway is dropped, the context compacted and
                                       the step tried once more
    pause_turn                         the turn goes back to the model as it is, to resume
    refusal                            said as a refusal; whatever was written is not kept
    model_context_window_exceeded      the context is compacted and the step tried once
                                       more; then the run says so
    cut                                the stream broke after its text was shown and nothing
                                       finished it: the text is kept, marked, and the run
                                       ends saying so

The pieces of a continued answer are one answer in the end: the chat saw them streamed one
after the other, and the history keeps them as one assistant turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from agent.context import Window
from agent.llm.streaming import CONTINUE_PROMPT
from agent.messages import ChatResponse, Message, TextBlock
from agent.outcomes import Failed, FailReason, RunTrace, failed
from agent.state import RunState

log = logging.getLogger(__name__)

MAX_CONTINUATIONS = 3
REFUSED = "I can't help with that: my language model declined to answer this request."
# After the text of an answer the output limit cut, once it may not be continued further.
LENGTH_CUT = "…\n\n_(My answer was cut off here: it reached the length I may write at once.)_"
TOOL_CALL_CUT = (
    "(Your last tool call was cut off by the output limit and was not run. Make it again, shorter.)"
)


@dataclass(frozen=True)
class Answer:
    text: str
    message: Message  # the assistant turn the history keeps


@dataclass(frozen=True)
class Act:
    """Run the turn's tool calls."""


@dataclass(frozen=True)
class Again:
    """Ask the model again (the state holds what it needs to go on)."""


@dataclass(frozen=True)
class End:
    reason: FailReason
    kept: str = ""  # text the user saw, to keep in the message that says why


Next = Answer | Act | Again | End


@dataclass(kw_only=True)
class StopReasons:
    """One run segment's stop-reason handling, and the answer pieces it has gathered."""

    parts: list[str] = field(default_factory=list)
    start: int | None = None  # where the continued answer's turns begin in the history
    continued: int = 0
    compacted: set[str] = field(default_factory=set)  # the reasons that compacted once
    shrink: int = 1  # the context window is divided by this once compacting was asked for

    @property
    def shown(self) -> bool:
        """Whether earlier pieces of this answer are on the user's screen already."""
        return bool(self.parts)

    def window(self, window: Window) -> Window:
        if self.shrink == 1:
            return window
        return Window(tokens=window.tokens // self.shrink, tools=window.tools)

    def after(self, response: ChatResponse, state: RunState) -> Next:
        reason, message = response.stop_reason, response.message
        if reason == "refusal":
            log.info("run %s: the model refused", state.run_id)
            return self._answer(state, REFUSED)
        if reason == "model_context_window_exceeded":
            return self._compact_or_stop(reason, state, "context_window")
        if reason == "max_tokens" and (response.cut_tool_call or message.tool_uses):
            return self._compact_or_stop("tool_call", state, "output_limit", nudge=TOOL_CALL_CUT)
        if message.tool_uses:
            self.start = None  # earlier pieces were the model's thinking: history as it is
            self.parts.clear()
            return Act()
        if reason == "cut":
            return End("cut", kept="".join([*self.parts, message.text]))
        if reason in ("max_tokens", "pause_turn"):
            if self.continued < MAX_CONTINUATIONS:
                self.continued += 1
                self._go_on(state, message, nudge=reason == "max_tokens")
                return Again()
            if reason == "max_tokens":
                return self._answer(state, "".join([*self.parts, message.text]) + LENGTH_CUT)
        if not self.parts and message.thinking:
            # A thinking model's answer is kept as it came: its thinking goes back to the
            # API with it in later runs (the text alone would change their prefix).
            return Answer(text=message.text, message=message)
        return self._answer(state, "".join([*self.parts, message.text]))

    def _go_on(self, state: RunState, message: Message, *, nudge: bool) -> None:
        """Hand a cut or paused turn back to the model: after it, a request to continue
        (a paused turn resumes from itself)."""
        if self.start is None:
            self.start = len(state.messages)
        self.parts.append(message.text)
        # the API refuses a last assistant turn that ends in whitespace; a thinking model's
        # turn goes back whole, as it came (never last: a request to continue follows)
        kept = message if message.thinking and nudge else Message.assistant(message.text.rstrip())
        state.messages.append(kept)
        if nudge:
            state.messages.append(Message.user(CONTINUE_PROMPT))

    def _answer(self, state: RunState, text: str) -> Answer:
        if self.start is not None:
            del state.messages[self.start :]
            self.start = None
        self.parts.clear()
        return Answer(text=text, message=Message.assistant(text))

    def _compact_or_stop(
        self, what: str, state: RunState, reason: FailReason, *, nudge: str | None = None
    ) -> Again | End:
        if what in self.compacted:
            return End(reason, kept="".join(self.parts))
        self.compacted.add(what)
        self.shrink *= 2
        log.warning("run %s: %s; compacting the context and trying again", state.run_id, what)
        if nudge is not None:
            last = state.messages[-1]
            if last.role == "user":
                content = [*last.content, TextBlock(text=nudge)]
                state.messages[-1] = Message(role="user", content=content)
        return Again()


def ended(stop: End, state: RunState, trace: RunTrace) -> Failed:
    """The run ends for `stop`: text the user saw stays, marked as cut, then one sentence
    says why; the history keeps it, so "go on" in the next message can pick it up."""
    if not stop.kept.strip():
        return failed(stop.reason, state, trace)
    state.messages.append(Message.assistant(stop.kept))
    outcome = failed(stop.reason, state, trace)
    return replace(outcome, message=f"{stop.kept}…\n\n_({outcome.message})_")
