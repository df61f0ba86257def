"""MCP tasks followed past their call: kept in Redis, polled by whichever worker claims them,
and their end posted once where the run's answer went.

A call whose task outlives it hands the task here (`follow`, the agent's `TaskFollower`): the
record goes to Redis with its next poll time, and the conversation is told the result will
follow. The loop claims due tasks with a lease (as reminders are claimed), asks the server
`tasks/get`, and puts the task back for its next poll, or posts its result (`tasks/result`),
its failure, or that it is gone (its ttl ran out, or the server lost it). Every last word on a
task goes under one outbox key, so a task claimed twice (a lease run out, two workers) is told
once. A server that cannot be reached keeps its tasks waiting; a restart loses nothing. A
`/cancel` in the conversation stops its tasks (`tasks/cancel`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from adapters.base import ConversationKey, OutboundMessage
from adapters.platform import ChatAdapter
from adapters.traits import mention
from agent.mcp.following import FollowedTask, TaskPolling, TaskState, interval
from agent.observations import clean
from agent.tools import ToolError
from bot.ops import metrics
from bot.ops.health import Health
from bot.runtime.due import DueKeys, DueLoop
from bot.runtime.keys import task_key
from bot.runtime.outbox import Outbox

log = logging.getLogger(__name__)

KEEP_AFTER_TTL = 86_400.0  # a record outlives its task's ttl by this much (or lives this long)
RESULT_CHARS = 3000  # of a result posted in the chat
BATCH = 50  # tasks claimed at once
AWAY_RETRY = 2.0  # seconds before asking a server that could not be reached again


@dataclass(frozen=True, kw_only=True)
class TaskWords:
    """The sentences said about a followed task ({tool}, {server}, and {result}, {reason} or
    {who}), as data: the conversation's book of sentences holds them."""

    later: str
    finished: str
    failed: str
    cancelled: str
    gone: str
    stopped: str
    private: str  # said in the chat when the requester cannot be written to privately


@dataclass(eq=False)
class TaskFollowing(DueLoop[FollowedTask]):
    """The agent's `TaskFollower`, and the loop that follows the tasks to their end."""

    outbox: Outbox
    adapters: dict[str, ChatAdapter]
    servers: TaskPolling
    words: TaskWords
    _: KW_ONLY
    claim_for: float = 30.0
    _away: set[str] = field(init=False, default_factory=set)  # not reached at the last try

    def __post_init__(self, health: Health | None) -> None:
        keys = self.keys
        due = DueKeys(due=keys.tasks_due, claimed=keys.tasks_claimed, record=keys.followed_task)
        kind = "followed MCP task"
        self.due_work(
            due,
            FollowedTask,
            kind=kind,
            loop="mcp-tasks",
            lease=self.claim_for,
            health=health,
            batch=BATCH,
        )

    async def follow(self, task: FollowedTask) -> None:
        key = _key(task)
        ttl = (task.ttl_ms / 1000 if task.ttl_ms else 0) + KEEP_AFTER_TTL
        await self.work.put(key, task, time.time() + interval(task.poll_ms), ttl)
        log.info("following MCP task %s of %s on %s", task.task_id, task.tool, task.server)
        try:
            await self._say(task, task_key(key, "later"), self.words.later)
        except Exception:  # kept all the same: its result is what matters
            log.warning("could not say that task %s continues", task.task_id, exc_info=True)

    async def due_pass(self) -> int:
        return await self.poll_due()

    async def poll_due(self, now: float | None = None) -> int:
        """Ask about every task due; the number that ended."""
        now = time.time() if now is None else now
        ended = 0
        for key, task in await self.work.claim(now):
            ended += await self._poll(key, task, now)
        metrics.FOLLOWED_TASKS.set(await self.work.count())
        return ended

    async def cancel(self, conversation_id: str, may_stop: Callable[[str], bool]) -> int:
        """Stop the tasks followed for `conversation_id` whose requester's work the person
        asking `may_stop` (the conversation's rule, given the requester's user id):
        `tasks/cancel`, then one sentence each. How many were stopped."""
        stopped = 0
        for key, task in await self.work.every():
            if task.conversation_id != conversation_id or not may_stop(task.user_id):
                continue
            try:
                await self.servers.cancel_task(task.server, task.task_id)
            except (ConnectionError, ToolError) as exc:  # no longer followed all the same
                log.warning(
                    "could not cancel MCP task %s on %s: %s", task.task_id, task.server, exc
                )
            await self._end(key, task, self.words.stopped)
            stopped += 1
        return stopped

    async def _poll(self, key: str, task: FollowedTask, now: float) -> int:
        try:
            state = await self.servers.task_state(task.server, task.task_id)
            if state.status == "completed":
                text, is_error = await self.servers.task_result(task.server, task.task_id)
        except ConnectionError as exc:
            if task.server not in self._away:
                self._away.add(task.server)
                log.warning("MCP tasks on %s wait for it to come back (%s)", task.server, exc)
            if task.ttl_ms is not None and now > task.created_at + task.ttl_ms / 1000:
                await self._end(key, task, self.words.gone)
                return 1
            await self.work.again(key, now + max(AWAY_RETRY, interval(task.poll_ms)))
            return 0
        except ToolError as exc:  # the server answered that it has no such task (any more)
            log.info("MCP task %s on %s is gone: %s", task.task_id, task.server, exc)
            await self._end(key, task, self.words.gone)
            return 1
        if task.server in self._away:
            self._away.discard(task.server)
            log.info("MCP server %s is back; following its tasks again", task.server)
        if state.status == "completed":
            if is_error:
                await self._end(key, task, self.words.failed, reason=_said(text))
            else:
                await self._end(key, task, self.words.finished, result=_said(text))
            return 1
        if state.status in ("failed", "cancelled"):
            said = self.words.failed if state.status == "failed" else self.words.cancelled
            await self._end(key, task, said, reason=_said(state.message or "no reason given"))
            return 1
        await self.work.again(key, now + interval(_poll_ms(state, task)))
        return 0

    async def _end(self, key: str, task: FollowedTask, said: str, **words: str) -> None:
        """Tell the conversation (once: one outbox key per task), then forget the task."""
        await self._say(task, task_key(key), said, **words)
        await self.work.done(key)
        log.info("MCP task %s of %s on %s ended", task.task_id, task.tool, task.server)

    async def _say(self, task: FollowedTask, slot: str, said: str, **words: str) -> None:
        conversation = ConversationKey.parse(task.conversation_id)
        adapter = self.adapters.get(conversation.platform)
        if adapter is None:
            log.error("no adapter for MCP task %s in %s", task.task_id, conversation.platform)
            return
        text = said.format(tool=task.tool, server=task.server, **words)
        unreachable = None
        if task.private_to:  # where the run's answer went: to the requester alone
            who = mention(conversation.platform, task.user_id, task.user_name)
            unreachable = self.words.private.format(who=who)
        message = OutboundMessage(text=text, private_to=task.private_to, unreachable=unreachable)
        await self.outbox.send(adapter, slot, conversation, message)


def _key(task: FollowedTask) -> str:
    """The task's name in Redis: the server's task id is its own, of any length or shape."""
    return hashlib.sha256(f"{task.server}\0{task.task_id}".encode()).hexdigest()[:32]


def _poll_ms(state: TaskState, task: FollowedTask) -> int | None:
    return state.poll_ms if state.poll_ms is not None else task.poll_ms


def _said(text: str) -> str:
    """A server's words as Parley posts them: cleaned and bounded."""
    return clean(text, RESULT_CHARS) or "(no text)"
