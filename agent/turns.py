"""ACT: what happens to the tool calls of one model turn, and how a suspended turn settles.

Read-only calls run (concurrently) at once. Side-effecting calls run only when an approved
plan covers them; otherwise they are gathered into one plan and the run suspends. `ask_user`
suspends for an answer. Every tool_use ends up with exactly one tool_result before the next
model call — some now, the rest when the human answers. What a suspended turn waits for,
and what the human's reply becomes, is in `deferred`.

An approved call runs at most once: with a journal, each attempt is recorded as started
before it runs and as finished with its result after, so a replay (another process taking
over a crashed run) reuses the result, and an attempt that started but never finished is
not repeated silently — the turn is put to the user again, as a retry they may approve.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from agent import deferred, standing
from agent.connecting import after_connect
from agent.deferred import (
    ASK_USER,
    PROPOSE_PLAN,
    UNCERTAIN,
    PendingPlan,
    PendingQuestion,
    PlanStep,
    Retry,
    asked_question,
    new_id,
)
from agent.execution import ExecutionPolicy, check_call, error_result, execute, notify
from agent.messages import ToolResultBlock, ToolUseBlock
from agent.outcomes import RunTrace, ToolCallTrace
from agent.protocols import (
    JournalEntry,
    ProgressCallback,
    ProgressEvent,
    StandingApprovals,
    ToolJournal,
)
from agent.state import RunState
from agent.stopping import NOT_RUN
from agent.tools import (
    ApprovalRequired,
    InputRequired,
    QuestionRequired,
    Tool,
    ToolContext,
    ToolRegistry,
)

Asked = ApprovalRequired | QuestionRequired | InputRequired

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class TurnResult:
    results: list[ToolResultBlock] = field(default_factory=list)
    question: PendingQuestion | None = None
    plan: PendingPlan | None = None


@dataclass(kw_only=True)
class _Calls:
    read_only: list[ToolUseBlock] = field(default_factory=list)
    covered: list[tuple[ToolUseBlock, Tool, str]] = field(default_factory=list)  # + plan step id
    uncovered: list[tuple[ToolUseBlock, Tool]] = field(default_factory=list)
    retries: dict[str, Retry] = field(default_factory=dict)  # uncovered calls of unknown fate
    asks: list[ToolUseBlock] = field(default_factory=list)
    proposals: list[ToolUseBlock] = field(default_factory=list)
    asked: dict[str, ApprovalRequired] = field(default_factory=dict)  # by call id
    standing: set[str] = field(default_factory=set)  # covered by a standing approval


@dataclass(kw_only=True)
class Actor:
    registry: ToolRegistry
    context: ToolContext
    policy: ExecutionPolicy
    trace: RunTrace
    on_progress: ProgressCallback | None = None
    journal: ToolJournal | None = None
    standing: StandingApprovals | None = None  # tools the requester approved for good
    stop: asyncio.Event | None = None  # set: no further call starts (`agent.stopping`)

    async def act(self, state: RunState, uses: list[ToolUseBlock]) -> TurnResult:
        turn = TurnResult()
        calls = self._sort(state, uses, turn)
        await self._stand(calls)
        for use, outcome in zip(
            calls.read_only, await self.run_concurrently(calls.read_only, state.steps), strict=True
        ):
            if isinstance(outcome, ApprovalRequired):  # it needs a yes after all
                calls.uncovered.append((use, self.registry.get(use.name)))
                calls.asked[use.id] = outcome
            elif isinstance(outcome, QuestionRequired | InputRequired):  # the requester first
                if turn.question is None:
                    turn.question = asked_question(use, outcome)
                    self._record(use, "", "deferred")
                else:
                    self._reply(turn, use, "Not run: waiting for the user first.", "skipped")
            else:
                turn.results.append(outcome)
        # approved earlier through propose_plan; in the model's order, journaled by plan step
        for use, checked, key in calls.covered:
            result = await self._run_once(state, use, Retry(key=key, attempt=0))
            if result is None:
                calls.uncovered.append((use, checked))
                calls.retries[use.id] = Retry(key=key, attempt=1)
            else:
                turn.results.append(result)
                if use.id in calls.standing:  # said in the chat: nothing runs unseen
                    self.trace.standing.append(use.name)
        if turn.question is None:
            turn.question = self._question(calls.asks, turn)
        else:
            for use in calls.asks:
                self._reply(turn, use, "Ask one question at a time; ask this one later.", "skipped")
        if turn.question is not None:
            for use in [*(u for u, _ in calls.uncovered), *calls.proposals]:
                text = "Not run: waiting for the user's answer first."
                self._reply(turn, use, UNCERTAIN if use.id in calls.retries else text, "skipped")
        else:
            turn.plan = self._plan(calls, turn)
        return turn

    def _sort(self, state: RunState, uses: list[ToolUseBlock], turn: TurnResult) -> _Calls:
        """Group a turn's calls by how they may run; invalid ones are answered at once."""
        calls = _Calls()
        for use in uses:
            if use.name == ASK_USER and use.name in self.registry:
                calls.asks.append(use)
            elif use.name == PROPOSE_PLAN and use.name in self.registry:
                calls.proposals.append(use)
            elif isinstance(checked := check_call(self.registry, use), str):
                self._reply(turn, use, checked, "invalid")
            elif not checked.needs_approval(use.input, self.context.run) or standing.permits(
                self.context.run.standing, checked
            ):
                calls.read_only.append(use)  # standing: approved in advance (a schedule's)
            elif step := deferred.consume(state.approved_plan, checked, use):
                calls.covered.append((use, checked, step.call_id))
            else:
                calls.uncovered.append((use, checked))
        return calls

    async def _stand(self, calls: _Calls) -> None:
        """Calls a standing approval of the requester covers join the approved ones."""
        if self.standing is not None:
            covered, calls.uncovered = await standing.split(
                self.standing, self.context.run, calls.uncovered
            )
            calls.covered += [(use, tool, use.id) for use, tool in covered]
            calls.standing |= {use.id for use, _ in covered}

    def _question(self, asks: list[ToolUseBlock], turn: TurnResult) -> PendingQuestion | None:
        question: PendingQuestion | None = None
        for use in asks:
            if isinstance(checked := check_call(self.registry, use), str):
                self._reply(turn, use, checked, "invalid")
            elif question is not None:
                self._reply(turn, use, "Ask one question at a time; ask this one later.", "skipped")
            else:
                question = deferred.question_for(use)
                self._record(use, "", "deferred")
        return question

    def _plan(self, calls: _Calls, turn: TurnResult) -> PendingPlan | None:
        """One plan for every uncovered side-effecting call, plus the model's proposal if any."""
        goal: str | None = None
        proposal_id: str | None = None
        proposed: list[PlanStep] = []
        for use in calls.proposals:
            if proposal_id is not None:
                self._reply(turn, use, "Propose one plan at a time.", "skipped")
            elif isinstance(proposal := self._check_proposal(use), str):
                self._reply(turn, use, proposal, "invalid")
            elif not proposal:
                self._reply(turn, use, "None of these steps needs approval; go ahead.", "ok")
            else:
                goal, proposal_id, proposed = str(use.input["goal"]), use.id, proposal
                self._record(use, "", "deferred")
        for use, _ in calls.uncovered:
            self._record(use, "", "deferred")
        steps = [
            deferred.step_for(use, tool, calls.asked.get(use.id), self.context.run)
            for use, tool in calls.uncovered
        ]
        if not steps and not proposed:
            return None
        return PendingPlan(
            id=new_id(),
            goal=goal,
            steps=steps,
            proposal_id=proposal_id,
            proposed=proposed,
            retries=calls.retries,
        )

    async def notify(self, event: ProgressEvent) -> None:
        await notify(self.on_progress, event)

    async def settle(
        self, state: RunState, *, answer: str | None, approved: bool | None, reason: str | None
    ) -> None:
        """Answer the suspended turn with the human's answer or decision, and close it."""
        if state.pending_question is not None and answer is not None:
            question, state.pending_question = state.pending_question, None
            state.last_user_text = answer
            if question.connect_call is not None:  # they may have connected: make the call
                result = await after_connect(self, state, question, answer)
            elif question.call is None:
                result = deferred.answered(question, answer, self.policy.output_limit)
            else:
                result = await self._answer_call(state, question, answer)
            if result is not None:
                state.close_turn([result])
        elif state.pending_plan is not None and approved is not None:
            results, again = await self.settle_plan(state, approved=approved, reason=reason)
            state.pending_plan = again
            if again is None and state.pending_question is None:
                state.close_turn(results)
            else:  # calls of unknown fate, or one asking a question: the user goes first
                state.pending_results = [*state.pending_results, *results]

    async def _answer_call(
        self, state: RunState, question: PendingQuestion, answer: str
    ) -> ToolResultBlock | None:
        """Make a call that asked a question again, with the answer; None when it asks
        another (then it is the run's pending question)."""
        call = question.call
        assert call is not None
        use = ToolUseBlock(id=question.tool_use_id, name=call.tool, input=call.args)
        try:
            return await self._run(
                use, state.steps, key=call.key, resume={**call.resume, "answer": answer}
            )
        except (ApprovalRequired, QuestionRequired, InputRequired) as asked:
            if isinstance(asked, ApprovalRequired):  # asked and answered already
                return error_result(use.id, f"{call.tool} could not run.", self.policy.output_limit)
            state.pending_question = asked_question(use, asked, key=call.key)
            self._record(use, "", "deferred")
            return None

    async def settle_plan(
        self, state: RunState, *, approved: bool, reason: str | None
    ) -> tuple[list[ToolResultBlock], PendingPlan | None]:
        """Results for the plan's calls, and a plan to put to the user again for the calls
        whose earlier attempt may or may not have happened (None when there are none)."""
        pending = state.pending_plan
        assert pending is not None
        if not approved:
            for step in pending.steps:
                use = ToolUseBlock(id=step.call_id, name=step.tool, input=step.args)
                self._record(use, "rejected", "rejected")
            return deferred.rejected(pending, reason), None
        results: list[ToolResultBlock] = []
        uncertain: dict[str, Retry] = {}
        for step in pending.steps:  # one at a time, in the order the model asked for them
            use = ToolUseBlock(id=step.call_id, name=step.tool, input=step.args)
            if self.stop is not None and self.stop.is_set():
                self._record(use, NOT_RUN, "skipped", is_error=True)
                results.append(ToolResultBlock(tool_use_id=use.id, content=NOT_RUN, is_error=True))
                continue
            retry = pending.retries.get(step.call_id, Retry(key=step.call_id, attempt=0))
            if step.private:  # from here on the run answers its requester alone
                state.private_to = self.context.run.user_id
                self.context = replace(self.context, private_to=state.private_to)
            if state.pending_question is not None:  # an earlier step asks something first
                self._record(use, "", "deferred")
                text = "Not run: waiting for the user's answer first."
                results.append(error_result(use.id, text, self.policy.output_limit))
                continue
            try:
                result = await self._run_once(state, use, retry)
            except InputRequired as asked:  # the server asks before it acts
                state.pending_question = asked_question(use, asked, key=retry.key)
                self._record(use, "", "deferred")
                continue
            if result is None:
                uncertain[step.call_id] = Retry(key=retry.key, attempt=retry.attempt + 1)
            else:
                results.append(result)
        plan, granted = deferred.approved(pending)
        if plan is not None:
            state.approved_plan = plan
        return [*results, *granted], deferred.retry_of(pending, uncertain)

    async def run_concurrently(
        self, uses: list[ToolUseBlock], step: int
    ) -> list[ToolResultBlock | Asked]:
        """Each call's result, or its request for approval (or for the requester to act), in
        the order of `uses`."""
        if not uses:
            return []
        if len(uses) == 1:
            return [await self._try(uses[0], step)]
        # TaskGroup cancels and drains the other calls if this task is cancelled
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._try(use, step)) for use in uses]
        return [task.result() for task in tasks]

    async def _try(self, use: ToolUseBlock, step: int) -> ToolResultBlock | Asked:
        try:
            return await self._run(use, step)
        except (ApprovalRequired, QuestionRequired, InputRequired) as asked:
            return asked

    async def _run(
        self,
        use: ToolUseBlock,
        step: int,
        key: str | None = None,
        resume: dict[str, Any] | None = None,
    ) -> ToolResultBlock:
        # a keyed call is one a person approved: the tool may give what it asked approval for
        context = replace(
            self.context, idempotency_key=key or use.id, approved=key is not None, resume=resume
        )
        result, call = await execute(
            self.registry, use, context, self.policy, step=step, on_progress=self.on_progress
        )
        self.trace.record_call(call)
        return result

    async def _run_once(
        self, state: RunState, use: ToolUseBlock, retry: Retry
    ) -> ToolResultBlock | None:
        """Run an approved call unless the journal has this attempt already: then reuse its
        result, or return None if it started and never finished (it may have happened)."""
        if self.journal is None:
            return await self._run(use, state.steps, key=retry.key)
        call = retry.key if retry.attempt == 0 else f"{retry.key}#{retry.attempt}"
        earlier = await self.journal.begin(self.context.run, state.run_id, call)
        if earlier is not None and not earlier.finished:
            log.warning(
                "run %s: %s was interrupted; asking before trying again", state.run_id, call
            )
            self._record(use, "", "deferred")
            return None
        if earlier is not None:
            status = "error" if earlier.is_error else "ok"
            self._record(use, earlier.content, status, is_error=earlier.is_error)
            return ToolResultBlock(
                tool_use_id=use.id, content=earlier.content, is_error=earlier.is_error
            )
        result = await self._run(use, state.steps, key=retry.key)
        entry = JournalEntry(finished=True, content=result.content, is_error=result.is_error)
        try:
            await self.journal.finish(self.context.run, state.run_id, call, entry)
        except Exception:  # it ran: go on with its result; a replay will ask before re-running
            log.warning("run %s: could not journal the end of %s", state.run_id, call)
        return result

    async def run_call(self, use: ToolUseBlock, step: int) -> ToolResultBlock:
        return await self._run(use, step)

    def record_deferred(self, use: ToolUseBlock) -> None:
        self._record(use, "", "deferred")

    def _check_proposal(self, use: ToolUseBlock) -> list[PlanStep] | str:
        checked = check_call(self.registry, use)
        if isinstance(checked, str):
            return checked
        return deferred.proposed_steps(
            use, checked, lambda call: check_call(self.registry, call), self.context.run
        )

    def _reply(self, turn: TurnResult, use: ToolUseBlock, text: str, status: str) -> None:
        result = (
            error_result(use.id, text, self.policy.output_limit)
            if status in ("invalid", "skipped")
            else ToolResultBlock(tool_use_id=use.id, content=text)
        )
        turn.results.append(result)
        self._record(use, result.content, status, is_error=result.is_error)

    def _record(self, use: ToolUseBlock, text: str, status: str, *, is_error: bool = False) -> None:
        call = ToolCallTrace(
            call_id=use.id, tool=use.name, args=dict(use.input), known=use.name in self.registry
        )
        call.observation, call.is_error, call.status = text, is_error, status  # type: ignore[assignment]
        self.trace.record_call(call)
