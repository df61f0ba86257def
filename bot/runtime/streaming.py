"""An answer shown while it is written, delivered exactly once under one outbox key.

The agent's `text_delta` events grow the answer; `AnswerStream` shows it through the
adapter's `LiveMessage` once it has been written for `first_show` seconds, and then at most
every `interval` seconds. An answer written within `first_show` is never shown half: it goes
out by `finish` alone, as one ordinary message. The final message goes out under the outbox
key the reply would have used anyway, so a replay after a crash behaves like the outbox: the
key's value (`bot/runtime/records.py`) says what happened before. It is read at the first
show, or else by `finish` as it claims the key (SET NX GET: one round trip for both)::

    (none)              nothing shown yet: stream, then finish
    {"live": "<id>"}    a crashed attempt left a half message: replace it with the answer
    "<id>" (JSON)       already delivered: post nothing, return that message
    in-flight           a finish died midway: post nothing (a missing answer beats a double)

Every write of the key is a compare-and-set against what this stream last saw there (nothing,
its own half message, or the half message it replays): a run that stalled past its lock's
lease while another worker took the entry over finds the key moved on, and stops showing
and posts nothing (the other run answers; never twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Literal

import redis.asyncio as aioredis

from adapters.base import (
    ConversationKey,
    MessageRef,
    OutboundMessage,
)
from adapters.platform import ChatAdapter, LiveMessage
from agent.protocols import ProgressEvent
from bot.ops import metrics
from bot.ops.health import redis_away
from bot.runtime.holding import PendingWrites
from bot.runtime.records import IN_FLIGHT, MARKERS, Live, delivered, live_value, record_sent

log = logging.getLogger(__name__)

Mode = Literal["unknown", "live", "replay", "delivered"]

# KEYS: the key. ARGV: expected value, new value ('': delete), ttl ms. → {1} or {0, found}.
_SWAP = """
local found = redis.call('get', KEYS[1])
if found == ARGV[1] then
  if ARGV[2] == '' then redis.call('del', KEYS[1]) return {1} end
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return {1}
end
return {0, found}
"""


def _raw(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def live_message(
    adapter: ChatAdapter,
    conversation: ConversationKey,
    *,
    user_id: str,
    team_id: str | None,
    is_direct: bool,
    allowed_mentions: frozenset[str] = frozenset(),
    reply_to: str | None = None,
) -> LiveMessage | None:
    """The adapter's live message for this place, if the adapter can stream at all; what it
    shows may ping only `allowed_mentions`, like the reply it becomes, and it replies to
    message `reply_to` (in a group: the one that asked) where the platform shows that."""
    return adapter.live(
        conversation,
        user_id=user_id,
        team_id=team_id,
        is_direct=is_direct,
        allowed_mentions=allowed_mentions,
        reply_to=reply_to,
    )


@dataclass(frozen=True, kw_only=True)
class StreamPlan:
    """An approved plan the run carries out, shown where the platform shows plans (Slack)."""

    title: str
    steps: tuple[tuple[str, str], ...]  # (tool, what the step does), in order


@dataclass(kw_only=True)
class _PlanTask:
    id: str
    tool: str
    title: str
    status: str = "pending"


@dataclass(kw_only=True)
class AnswerStream:
    live: LiveMessage
    adapter: ChatAdapter
    conversation: ConversationKey
    redis: aioredis.Redis
    redis_key: str
    ttl_ms: int
    interval: float
    first_show: float = 0.0  # seconds an answer is written before it is first shown
    text: str = ""
    # "live" when no earlier attempt can have left anything under the key (saves a read)
    mode: Mode = "unknown"
    later: PendingWrites | None = None  # its record then waits there for the next session save
    _shown: str = ""
    _last_show: float = 0.0  # 0.0: nothing shown yet
    _first_text: float | None = None  # when the answer's first text came
    _recorded: str | None = None
    _previous: str | None = None  # the half message a crashed attempt left
    _delivered: str | None = None  # the message an earlier attempt delivered
    _seen: bytes | None = None  # what is under the key as this stream last read or wrote it
    _flush: asyncio.Task[None] | None = field(default=None, repr=False)
    _flush_waiting: bool = False  # the flush task still sleeps (cancelling it loses nothing)
    _tasks: list[tuple[str, str]] = field(default_factory=list)  # (task id, tool) running
    _began: float = field(default_factory=time.monotonic)
    plan: StreamPlan | None = None
    _plan: list[_PlanTask] = field(default_factory=list)
    _plan_shown: bool = False

    def __post_init__(self) -> None:
        if self.plan is not None:
            self._plan = [
                _PlanTask(id=f"plan-{n}", tool=tool, title=title or tool)
                for n, (tool, title) in enumerate(self.plan.steps, start=1)
            ]

    async def on_progress(self, event: ProgressEvent) -> None:
        if event.kind in ("tool_started", "tool_finished"):
            await self._task(event)
        elif event.kind == "text_delta":
            self.text += event.detail.get("text", "")
            if self._first_text is None:
                self._first_text = time.monotonic()
            await self._grow()
        elif event.kind == "text_reset":
            self.text = ""
            await self._cancel_flush()
            if not self._last_show:
                self._first_text = None  # the next text is a new answer with its own hold
            if self._shown:
                self._shown = ""
                await self.live.reset(event.detail.get("status"))

    async def _grow(self) -> None:
        if self.mode not in ("unknown", "live") or self._flush is not None:
            return
        if self._last_show:
            due = self._last_show + max(self.interval, self.live.min_interval)
        else:
            due = (self._first_text or 0.0) + self.first_show
        wait = due - time.monotonic()
        if wait <= 0:
            await self._show()
        else:
            self._flush_waiting = True
            self._flush = asyncio.create_task(self._show_later(wait))

    async def _show_later(self, wait: float) -> None:
        try:
            await asyncio.sleep(wait)
            self._flush_waiting = False
            await self._show()
        finally:
            self._flush = None

    async def _show(self) -> None:
        text = self.text
        if not text.strip() or text == self._shown:
            return
        if self.mode == "unknown":
            await self._read_key()
            if self.mode != "live":
                return
        self._last_show = time.monotonic()
        self._shown = text
        await self._show_plan()
        await self.live.show(text)
        await self._record_live()

    async def _record_live(self) -> None:
        """Note the message being grown under the key, so a replay completes it."""
        message_id = self.live.message_id
        if message_id is not None and message_id != self._recorded:
            try:
                found = await self._swap(live_value(message_id))
            except Exception as exc:
                if not redis_away(exc):
                    raise
                # Showing goes on; the marker is tried again with the next update.
                log.debug("could not record the live message of %s", self.redis_key)
                return
            if found is not None:
                await self._lost_key(found)
                return
            self._recorded = message_id

    async def _task(self, event: ProgressEvent) -> None:
        """A tool step as a task of the live message, where the platform shows tasks (Slack's
        task updates): once the run has worked for `first_show`, recorded like shown text."""
        if not self.live.shows_steps or event.tool is None or self.mode not in ("unknown", "live"):
            return
        if event.kind == "tool_started":
            step = next(
                (p for p in self._plan if p.tool == event.tool and p.status == "pending"), None
            )
            task_id = step.id if step else f"task-{event.step}-{len(self._tasks) + 1}"
            self._tasks.append((task_id, event.tool))
            status = "in_progress"
        else:
            running = [t for t in self._tasks if t[1] == event.tool]
            if not running:
                return
            task_id = running[0][0]
            self._tasks.remove(running[0])
            status = "complete" if event.detail.get("status") == "ok" else "error"
        step = next((p for p in self._plan if p.id == task_id), None)
        if step is not None:
            step.status = status
        if not self._last_show and time.monotonic() - self._began < self.first_show:
            return  # a quick run shows nothing half, tasks included
        if self.mode == "unknown":
            await self._read_key()
            if self.mode != "live":
                return
        if not await self._show_plan():  # a plan shown now shows this step as it stands
            await self.live.task(task_id, step.title if step else event.tool, status)
        await self._record_live()

    async def _show_plan(self) -> bool:
        """The plan as it stands, once, before anything else is shown; whether it went now."""
        if self.plan is None or self._plan_shown or not self.live.shows_steps:
            return False
        self._plan_shown = True
        await self.live.plan(self.plan.title, [(p.id, p.title, p.status) for p in self._plan])
        return True

    async def _read_key(self) -> None:
        self._learn(await self.redis.get(self.redis_key))

    async def _swap(self, value: bytes) -> bytes | None:
        """Set the key to `value` if it still holds what this stream last saw there (one
        round trip); None if it did, else what another run left there instead."""
        found = await self._swap_once(value)
        mine = self.live.message_id
        if found is not None and mine is not None and found == live_value(mine):
            self._seen = found  # our own marker, stored though Redis's answer was lost
            found = await self._swap_once(value)
        return found

    async def _swap_once(self, value: bytes) -> bytes | None:
        if self._seen is None:
            found = await self.redis.set(self.redis_key, value, px=self.ttl_ms, nx=True, get=True)
            if found is not None:
                return _raw(found)  # type: ignore[arg-type]
        else:
            args = (self.redis_key, self._seen, value, self.ttl_ms)
            swapped = await self.redis.eval(_SWAP, 1, *args)  # type: ignore[misc]
            if not int(swapped[0]):
                return _raw(swapped[1]) if len(swapped) > 1 else b""
        self._seen = value
        return None

    async def _lost_key(self, found: bytes) -> None:
        """Another run wrote the key since we looked (we stalled past the lock's lease): it
        has the entry now. Show and post nothing more; take back what we showed."""
        log.warning(
            "not delivering %s: another run took it over (this one lost its conversation)",
            self.redis_key,
        )
        self.mode, self._delivered = "delivered", None
        with contextlib.suppress(ValueError):
            if isinstance(sent := delivered(found), str):
                self._delivered = sent
        if self.live.message_id is not None and self.live.message_id != self._delivered:
            await self.live.discard()

    def _learn(self, value: bytes | str | None) -> None:
        """The mode that what an earlier attempt left under the key calls for."""
        self._seen = None if value is None else _raw(value)
        if value is None:
            self.mode = "live"
        elif _raw(value).startswith(IN_FLIGHT) or _raw(value) in MARKERS:
            self.mode = "delivered"  # a send or finish died midway, or the outbox has it
        else:
            found = delivered(value)
            if isinstance(found, Live):
                self.mode, self._previous = "replay", found.live
            else:
                self.mode, self._delivered = "delivered", found

    async def _cancel_flush(self) -> None:
        """Drop a pending update; one already on its way is let finish (cut off mid-call, a
        first message could be posted without our knowing its id)."""
        task = self._flush
        if task is not None:
            if self._flush_waiting:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._flush = None

    async def settle(self) -> None:
        """The run is over: nothing more to show before `finish` or `discard`."""
        await self._cancel_flush()

    async def discard(self) -> None:
        """The run ended in a question or a plan: take back what was shown of its text."""
        await self._cancel_flush()
        if self.mode == "unknown":
            await self._read_key()
        ours = True
        if self._seen is not None and (self._recorded is not None or self.mode == "replay"):
            # the key belongs to the answer; the question or plan is sent under it instead,
            # unless another run has written it since: then it, and the message, are that run's
            swapped = await self.redis.eval(_SWAP, 1, self.redis_key, self._seen, b"", 0)  # type: ignore[misc]
            ours = bool(int(swapped[0]))
        if ours and (self._shown or self.live.message_id is not None):
            await self.live.discard()
        self._shown = ""

    async def finish(self, message: OutboundMessage) -> MessageRef | None:
        """Deliver the final message once, finishing or replacing what was streamed."""
        await self._cancel_flush()
        platform = self.conversation.platform
        claimed = False
        if self.mode == "unknown":
            # take the key if nothing is under it, else learn what is (one round trip)
            previous: bytes | None = await self.redis.set(  # type: ignore[assignment]
                self.redis_key, IN_FLIGHT, px=self.ttl_ms, nx=True, get=True
            )
            self._learn(previous)
            claimed = previous is None
        if self.mode == "delivered":
            metrics.DELIVERIES.labels(platform, "replayed").inc()
            if self._delivered is None:
                log.warning(
                    "not re-sending %s: an earlier attempt may have posted it", self.redis_key
                )
                return None
            return MessageRef(conversation=self.conversation, message_id=self._delivered)
        # the key is ours unless another run took it since we looked (we stalled past the
        # lock's lease): the claim checks, in the round trip it costs anyway
        try:
            found = None if claimed else await self._swap(IN_FLIGHT)
        except Exception as exc:
            if redis_away(exc):
                await self._take_back_unrecorded()
            raise
        if found is not None:
            await self._lost_key(found)
            return await self.finish(message)  # as delivered: post nothing
        deliver = asyncio.ensure_future(self._deliver(message))
        try:
            ref = await asyncio.shield(deliver)
        except asyncio.CancelledError:
            await self._end_cancelled(deliver)
            raise
        except BaseException:
            await self.redis.delete(self.redis_key)  # the caller hands it to the outbox
            raise
        await record_sent(self.redis, self.redis_key, ref.message_id, self.ttl_ms, self.later)
        metrics.DELIVERIES.labels(platform, "sent").inc()
        return ref

    async def _end_cancelled(self, deliver: asyncio.Future[MessageRef]) -> None:
        """Cancelled mid-call (the lock was lost, or a drain ran out): the message may be out
        already, so the call is let end and what it posted recorded, and a run that took the
        entry over posts nothing; if it posted nothing, the key is let go for that run."""
        try:
            ref = await deliver
        except Exception:
            await self.redis.delete(self.redis_key)
            return
        await record_sent(self.redis, self.redis_key, ref.message_id, self.ttl_ms, None)

    async def _take_back_unrecorded(self) -> None:
        """The entry is handled again once Redis is back, and its replay cannot know of a
        half message whose marker was never stored: take that message back now."""
        if self.live.message_id is None or self.live.message_id == self._recorded:
            return
        try:
            await self.live.discard()
        except Exception:
            log.warning("could not take back a half-shown answer in %s", self.conversation.id)

    async def _deliver(self, message: OutboundMessage) -> MessageRef:
        if self._previous is not None:
            # a replay: the half message from before the crash becomes the whole answer
            ref = MessageRef(conversation=self.conversation, message_id=self._previous)
            try:
                await self.adapter.edit(ref, message)
                return ref
            except Exception:
                log.warning("could not complete the interrupted answer; posting it anew")
                return await self.adapter.send(self.conversation, message)
        if any(p.status != "pending" for p in self._plan):
            await self._show_plan()  # a quick run's plan: shown whole, with the answer
        return await self.live.finish(message)
