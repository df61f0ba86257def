"""The ReAct loop: OBSERVE → THINK → ACT → CHECK, until an answer, a human, or a guard.

Kept small on purpose: context fitting lives in `context`, tool calls in `turns`, what a run
waits for from a human in `deferred`, what each stop reason calls for in `stop_reasons`,
prompt text in `prompts`. A run that waits for a human returns; `resume` picks it up again
from its `RunState`, in this process or another.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.context import Window, estimate_tools, fit
from agent.deferred import PendingQuestion
from agent.deps import MissingDependency
from agent.execution import ExecutionPolicy
from agent.llm.base import ChatModel, LLMError
from agent.messages import ChatRequest, ContentBlock, Message, TextBlock, ToolSpec, Usage
from agent.outcomes import (
    AwaitingAnswer,
    AwaitingApproval,
    Finished,
    Outcome,
    RunTrace,
    StepTrace,
    failed,
)
from agent.prompts import DEFAULT_SYSTEM_PROMPT, build_system_prompt
from agent.protocols import (
    JournalUnavailable,
    MemoryRecord,
    MemoryStore,
    ProgressCallback,
    ProgressEvent,
    Recall,
    RunContext,
    Scheduler,
    StandingApprovals,
    ToolJournal,
)
from agent.recalling import StepRecall
from agent.state import RunState
from agent.stop_reasons import Again, Answer, End, StopReasons, ended
from agent.stopping import RunStopped, check, unless_stopped
from agent.thinking import think
from agent.tools import ToolContext, ToolRegistry, ToolSource, offered_by
from agent.turns import Actor

log = logging.getLogger(__name__)

MOVED_ON = "Not done: the user sent a new message instead of answering."
NO_ANSWER = "I'm not sure what to add to that."


class ResumeError(ValueError):
    """`resume` was called with a decision that does not fit what the run waits for."""


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    max_steps: int = 12
    token_budget: int = 200_000
    deadline: float = 300.0
    context_tokens: int = 24_000
    tool_timeout: float = 30.0
    tool_retries: int = 3
    tool_output_limit: int = 4000
    max_tokens: int = 4096
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    recall_k: int = 5
    stream: bool = True  # stream think steps to whoever watches the run's progress


@dataclass(frozen=True, kw_only=True)
class _Offer:
    """The tools a run offers the model, the window left beside them, and their deps."""

    registry: ToolRegistry
    version: int  # the registry's, when this was derived
    specs: list[ToolSpec]
    window: Window
    deps: Mapping[type[Any], object]


class Agent:
    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry,
        *,
        recall: Recall | None = None,
        memory: MemoryStore | None = None,
        scheduler: Scheduler | None = None,
        journal: ToolJournal | None = None,
        standing: StandingApprovals | None = None,
        config: AgentConfig = AgentConfig(),
        system_prompt: str | None = None,
        on_progress: ProgressCallback | None = None,
        tool_source: ToolSource | None = None,
        deps: Mapping[type[Any], object] | None = None,
        side_model: ChatModel | None = None,
    ) -> None:
        self.model = model
        self.side_model = side_model or model  # side jobs: the running summary
        self.tools = tools
        self.tool_source = tool_source
        self.recall = recall if recall is not None else memory
        self.memory = memory
        self.scheduler = scheduler
        self.journal = journal
        self.standing = standing
        self.config = config
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.on_progress = on_progress
        # for tools' `Dep[...]` parameters beside the registry's; fixed: register later ones
        # with `ToolRegistry.provide`, which the next run sees
        self._deps = dict(deps or {})
        self._offered: _Offer | None = None
        self._policy = ExecutionPolicy(
            timeout=config.tool_timeout,
            retries=config.tool_retries,
            output_limit=config.tool_output_limit,
            backoff_base=config.backoff_base,
            backoff_max=config.backoff_max,
        )

    async def run(
        self,
        objective: str,
        context: RunContext,
        *,
        history: RunState | None = None,
        on_progress: ProgressCallback | None = None,
        attachments: Sequence[ContentBlock] = (),
        stop: asyncio.Event | None = None,
        run_id: str | None = None,
    ) -> Outcome:
        """Start on a new objective; `history` is this conversation's previous run, if any.

        `attachments` (earlier messages of a thread, images, file text) go before the
        objective in the user's turn. Setting `stop` ends the run at its next step boundary
        (`agent.stopping`). `run_id`: the id the host already logs the run under.
        """
        state = RunState(context=context, objective=objective, last_user_text=objective)
        if run_id is not None:
            state.run_id = run_id
        if history is not None:
            previous = history.clone()
            previous.abandon(MOVED_ON)
            previous.keep_for(context)  # another requester's tool results stay theirs
            state.messages, state.summary = previous.messages, previous.summary
            state.private_to = previous.private_to
        new = [*attachments, TextBlock(text=objective)]
        last = state.messages[-1] if state.messages else None
        if last is not None and last.role == "user":  # keep roles alternating
            state.messages[-1] = Message(role="user", content=[*last.content, *new])
        else:
            state.messages.append(Message(role="user", content=new))
        return await self._segment(
            state, on_progress, answer=None, approved=None, reason=None, stop=stop
        )

    async def resume(
        self,
        state: RunState,
        *,
        answer: str | None = None,
        approved: bool | None = None,
        reason: str | None = None,
        on_progress: ProgressCallback | None = None,
        attachments: Sequence[ContentBlock] = (),
        stop: asyncio.Event | None = None,
    ) -> Outcome:
        """Continue a suspended run with the user's answer or approval decision.

        `attachments` (images, file text) sent along with an answer follow it in the
        user's turn, as they would follow a new objective."""
        if state.pending_question is not None and answer is None:
            raise ResumeError("the run waits for an answer")
        if state.pending_plan is not None and approved is None:
            raise ResumeError("the run waits for an approval decision")
        if not state.is_suspended:
            raise ResumeError("the run is not waiting for anything")
        state = state.clone()
        return await self._segment(
            state,
            on_progress,
            answer=answer,
            approved=approved,
            reason=reason,
            attachments=attachments,
            stop=stop,
        )

    async def _segment(
        self,
        state: RunState,
        on_progress: ProgressCallback | None,
        *,
        answer: str | None,
        approved: bool | None,
        reason: str | None,
        attachments: Sequence[ContentBlock] = (),
        stop: asyncio.Event | None = None,
    ) -> Outcome:
        trace = RunTrace()
        registry = self.tools
        extra = await offered_by(self.tool_source, state.context) if self.tool_source else []
        if extra:
            registry = registry.with_tools(extra)
        offer = self._offer(registry)
        context = ToolContext(
            run=state.context,
            memory=self.memory,
            scheduler=self.scheduler,
            deps=offer.deps,
            shown={t.name: t.shown for t in registry.tools() if t.shown},
            private_to=state.private_to,
        )
        actor = Actor(
            registry=registry,
            context=context,
            policy=self._policy,
            trace=trace,
            on_progress=on_progress or self.on_progress,
            journal=self.journal,
            standing=self.standing,
            stop=stop,
        )
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.config.deadline) as deadline:
                await actor.settle(state, answer=answer, approved=approved, reason=reason)
                last = state.messages[-1] if state.messages else None
                if attachments and last is not None and last.role == "user":
                    content = [*last.content, *attachments]  # after the tool results
                    state.messages[-1] = Message(role="user", content=content)
                if state.pending_plan is not None:  # approved calls of unknown fate: ask again
                    outcome: Outcome = AwaitingApproval(
                        plan=state.pending_plan.plan(), state=state, trace=trace
                    )
                elif state.pending_question is not None:  # the call asks something more
                    outcome = _awaiting(state.pending_question, state, trace)
                else:
                    recall = StepRecall(self.recall, self.config.recall_k)
                    outcome = await self._loop(state, actor, trace, recall, offer)
        except JournalUnavailable:
            raise  # nothing ran; the host handles the event again once its store is back
        except RunStopped:
            outcome = failed("stopped", state, trace)
        except LLMError as exc:
            log.warning("run %s: model call failed: %s", state.run_id, type(exc).__name__)
            outcome = failed("model_error", state, trace, exc)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                outcome = failed("deadline", state, trace)
            else:
                log.exception("run %s failed", state.run_id)
                outcome = failed("error", state, trace, exc)
        trace.duration = time.monotonic() - started
        if not outcome.state.is_suspended:
            outcome.state.drop_images()  # the run is over; its images are not kept
        return outcome

    async def _loop(
        self, state: RunState, actor: Actor, trace: RunTrace, recall: StepRecall, offer: _Offer
    ) -> Outcome:
        specs, window = offer.specs, offer.window
        stop = actor.stop
        stops = StopReasons()  # what each stop reason calls for (`stop_reasons`)
        while True:
            # CHECK the guards before spending another model call
            check(stop)
            if state.steps >= self.config.max_steps:
                return failed("max_steps", state, trace)
            if state.usage.total >= self.config.token_budget:
                return failed("token_budget", state, trace)
            step = StepTrace(index=state.steps + 1)
            trace.steps.append(step)
            step_started = time.monotonic()
            await actor.notify(ProgressEvent(kind="step_started", step=step.index))

            # OBSERVE
            memories = await recall(state)

            def system_for(summary: str, memories: list[MemoryRecord] = memories) -> str:
                latest = state.messages[-1]
                # Said once is enough: the newest turn often is the objective, word for word.
                restated = latest.role == "user" and latest.text.endswith(state.objective)
                return build_system_prompt(
                    base=self.system_prompt,
                    context=state.context,
                    objective="" if restated else state.objective,
                    memories=memories,
                    summary=summary,
                )

            fitted = stops.window(window)
            usage, calls = await fit(
                state, model=self.side_model, window=fitted, system_for=system_for
            )
            self._account(state, trace, usage)
            trace.summaries += calls

            # THINK
            request = ChatRequest(
                system=system_for(state.summary),
                messages=list(state.messages),
                tools=specs,
                max_tokens=self.config.max_tokens,
                system_stable=len(self.system_prompt.rstrip()),  # build_system_prompt's head
            )
            think_started = time.monotonic()
            thinking = think(
                self.model,
                request,
                actor,
                step=step.index,
                stream=self.config.stream,
                shown=stops.shown,
            )
            response = await unless_stopped(stop, thinking)
            step.model_duration = time.monotonic() - think_started
            state.steps += 1
            self._account(state, trace, response.usage)
            message = response.message
            step.thought = message.text
            after = stops.after(response, state)
            step.duration = time.monotonic() - step_started
            if isinstance(after, Again):
                continue
            if isinstance(after, End):
                return ended(after, state, trace)
            if isinstance(after, Answer):
                answer = after.text.strip() or NO_ANSWER
                state.messages.append(
                    after.message if after.text.strip() else Message.assistant(answer)
                )
                return Finished(answer=answer, state=state, trace=trace)

            # ACT
            state.messages.append(message)
            turn = await actor.act(state, message.tool_uses)
            step.duration = time.monotonic() - step_started
            if turn.question is not None:
                state.pending_question, state.pending_results = turn.question, turn.results
                check(stop)  # what ran is kept; the question is not asked
                return _awaiting(turn.question, state, trace)
            if turn.plan is not None:
                state.pending_plan, state.pending_results = turn.plan, turn.results
                check(stop)
                return AwaitingApproval(plan=turn.plan.plan(), state=state, trace=trace)
            state.close_turn(turn.results)

    def _offer(self, registry: ToolRegistry) -> _Offer:
        """What this run offers, derived again only when the registry changed (so a tool
        registered after the agent was built is offered too); raises `MissingDependency`
        before the run starts if a tool needs an object nobody provided."""
        cached = self._offered
        if (
            cached is not None
            and cached.registry is registry
            and cached.version == registry.version
        ):
            return cached
        deps = {**registry.deps, **self._deps}
        for item in registry.tools():
            for kind in item.deps.values():
                if kind not in deps:
                    raise MissingDependency(item.name, kind)
        specs = registry.specs()
        window = Window(tokens=self.config.context_tokens, tools=estimate_tools(specs))
        offer = _Offer(
            registry=registry, version=registry.version, specs=specs, window=window, deps=deps
        )
        if registry is self.tools:  # a run's own registry (with its MCP tools) is not kept
            self._offered = offer
        return offer

    @staticmethod
    def _account(state: RunState, trace: RunTrace, usage: Usage) -> None:
        state.usage = state.usage + usage
        trace.usage = trace.usage + usage


def _awaiting(q: PendingQuestion, state: RunState, trace: RunTrace) -> AwaitingAnswer:
    return AwaitingAnswer(
        question=q.question,
        options=q.options,
        question_id=q.id,
        state=state,
        trace=trace,
        link=(q.link_label, q.link_url) if q.link_label and q.link_url else None,
    )
