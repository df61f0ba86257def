"""2025-11-25 questions asked mid-call, answered while the call stays open.

A 2025-11-25 server asks (`elicitation/create`) during its `tools/call` and waits for the
answer. The call is kept open here, in the background, while the question waits in the chat
(at most `wait` seconds, which the question says): the tool returns the question at once, the
run suspends as for any question, and the requester's answer, when it comes, is handed to the
server as the answer to its request; the call then goes on to its result (or its next
question). The server hears that person's answer, or `cancel` once the wait is over.

Whose question it is: the SDK does not say which call a request belongs to, so it is the
call in flight on this session that is not already waiting on a question. While several
could have asked, the question waits (bounded) until only one can have, as the others end or
ask; it is never put to more than one person, and a prepared answer (a call made again)
only ever goes to the call it was prepared for.

An answer that finds no open call (Parley restarted, the wait ran out, the call ended) raises
`CallClosed`: the tool decides whether a call may be made again (agent/mcp/tools.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import mcp.types as mt
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT as Progress

from agent.deferred import new_id

log = logging.getLogger(__name__)

OPEN = "open:"  # the request_state of a question whose call is open: "open:<call id>"
AGAIN = "again:"  # of a call made again with answers given earlier: "again:<json>"
MAX_CLOSED = 512  # calls whose end is remembered, to say why an answer came too late
RESTARTED = "restarted"  # no record of the call here: Parley restarted, or another process
WAITED = "waited"  # no answer within the wait: the server heard "cancel"
ENDED = "ended"  # the call ended before the answer came (the server gave up, say)
WAIT_META = "parley/wait"  # in an open call's question: seconds it waits for the answer


Result = mt.CallToolResult | mt.InputRequiredResult  # a 2026-07-28 server asks this way


class OpenQuestion(mt.InputRequiredResult):
    """The question of a call kept open here, in the shape of a 2026-07-28 server's: its
    state ("open:<call id>") is Parley's, which no server's result can pass for."""


class CallClosed(Exception):  # noqa: N818 - a signal, not an error
    """The call the answer was for is no longer open; `why` is RESTARTED, WAITED or ENDED,
    and `result` what the call returned without the answer, if it did."""

    def __init__(self, why: str, result: mt.CallToolResult | None = None) -> None:
        super().__init__(why)
        self.why, self.result = why, result


@dataclass(kw_only=True, eq=False)
class OpenCall:
    id: str
    prepared: dict[str, mt.ElicitResult] = field(default_factory=dict)  # fingerprint → answer
    task: asyncio.Task[Result] | None = None
    asking: mt.ElicitRequestParams | None = None  # the question waiting for its answer
    answer: asyncio.Future[mt.ElicitResult] | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    waited: bool = False  # the wait ran out on one of its questions
    session: object | None = None  # the session the call was sent on
    tool: str = ""
    gated: bool = False  # holds the gate until it asks or ends
    relay: Progress | None = None  # where its progress goes while a run follows it

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.relay is not None:
            await self.relay(progress, total, message)


Send = Callable[[OpenCall], Awaitable[Result]]


@dataclass(frozen=True, kw_only=True)
class Closed:
    why: str
    result: mt.CallToolResult | None
    at: float


class OpenCalls:
    """The calls of one session and its elicitation callback (pass it as the session's
    `elicitation_callback`)."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self._calls: dict[str, OpenCall] = {}
        self._closed: OrderedDict[str, Closed] = OrderedDict()
        self._changed = asyncio.Event()  # set (and replaced) when calls start, ask or end
        # Tools seen asking on this session: one of them at a time runs until it asks or
        # ends, so its question cannot be mistaken for another asking call's.
        self._askers: set[str] = set()
        self._gate = asyncio.Lock()

    def _change(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # --- the caller's side -------------------------------------------------------------------

    async def call(
        self,
        send: Send,
        prepared: dict[str, mt.ElicitResult] | None = None,
        progress: Progress | None = None,
        tool: str = "",
    ) -> Result:
        """Make the call (`send`, which names its session in `call.session` and reports
        progress through `call.progress`); its result, or its first question (an
        `input_required` result naming the open call) while the call waits for the answer."""
        call = OpenCall(id=new_id(), prepared=dict(prepared or {}), relay=progress, tool=tool)
        if tool in self._askers:
            await self._gate.acquire()
            call.gated = True
        self._calls[call.id] = call
        call.task = asyncio.create_task(_run(call, send), name=f"mcp-call:{call.id}")
        call.task.add_done_callback(lambda _: self._ended(call))  # even if it never started
        self._change()
        return await self._follow(call)

    async def answer(
        self, call_id: str, response: mt.ElicitResult, progress: Progress | None = None
    ) -> Result:
        """Give the open call's question its answer; the call's result or next question.
        CallClosed when the call is no longer open here."""
        call = self._calls.get(call_id)
        if call is not None and call.answer is not None and not call.answer.done():
            call.relay = progress
            call.asked.clear()
            call.answer.set_result(response)
            return await self._follow(call)
        if call is not None:  # still running, but its question is over
            raise CallClosed(WAITED if call.waited else ENDED)
        closed = self._closed.get(call_id)
        if closed is None:
            raise CallClosed(RESTARTED)
        raise CallClosed(closed.why, closed.result)

    def is_open(self, call_id: str) -> bool:
        call = self._calls.get(call_id)
        return call is not None and call.answer is not None and not call.answer.done()

    def _ended(self, call: OpenCall) -> None:
        task = call.task
        assert task is not None and task.done()
        result = None
        if not task.cancelled() and task.exception() is None:  # retrieved: nobody may wait
            result = task.result()
        self._ungate(call)
        self._calls.pop(call.id, None)
        ended = result if isinstance(result, mt.CallToolResult) else None
        self._closed[call.id] = Closed(
            why=WAITED if call.waited else ENDED, result=ended, at=time.time()
        )
        while len(self._closed) > MAX_CLOSED:
            self._closed.popitem(last=False)
        self._change()

    async def _follow(self, call: OpenCall) -> Result:
        task = call.task
        assert task is not None
        asked = asyncio.ensure_future(call.asked.wait())
        try:
            await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if call.asking is None:  # the run stopped while the call worked: stop it too
                task.cancel()
            raise
        finally:
            asked.cancel()
        if task.done():
            return task.result()
        assert call.asking is not None
        call.relay = None  # the run waits: nothing of this call reaches its status line
        # the call stays open: its question goes to the chat, named by the call's id
        return OpenQuestion(
            input_requests={OPEN + call.id: mt.ElicitRequest(params=call.asking)},
            request_state=OPEN + call.id,
            _meta={WAIT_META: self.wait},
        )

    async def close(self) -> None:
        """Stop every open call (the session is closing)."""
        tasks = [c.task for c in self._calls.values() if c.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    # --- the server's side: its elicitation requests ------------------------------------------

    async def __call__(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        call = await self._owner(context.session)
        if call is None:
            log.warning("an MCP server asked a question no single call can be asked; cancelled")
            return mt.ElicitResult(action="cancel")
        self._askers.add(call.tool)
        key = fingerprint(params)
        if key in call.prepared:  # a call made again: its own answer, given earlier
            return call.prepared.pop(key)
        answer: asyncio.Future[mt.ElicitResult] = asyncio.get_running_loop().create_future()
        call.asking, call.answer = params, answer
        call.asked.set()
        self._ungate(call)
        self._change()
        try:
            async with asyncio.timeout(self.wait):
                return await asyncio.shield(answer)
        except TimeoutError:
            call.waited = True
            log.info(
                "MCP call %s: no answer within %.0f s; the server hears cancel", call.id, self.wait
            )
            return mt.ElicitResult(action="cancel")
        finally:
            if not answer.done():
                answer.cancel()
            call.asking, call.answer = None, None
            call.asked.clear()
            self._change()

    def _ungate(self, call: OpenCall) -> None:
        if call.gated:
            call.gated = False
            self._gate.release()

    async def _owner(self, session: object) -> OpenCall | None:
        """The one call on `session` that can have asked, waiting (bounded) while several
        could have."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.wait):
                while True:
                    could = [
                        c
                        for c in self._calls.values()
                        if c.session is session
                        and c.asking is None
                        and c.task is not None
                        and not c.task.done()
                    ]
                    if len(could) <= 1:
                        return could[0] if could else None
                    self._askers.update(c.tool for c in could)  # one of them asks
                    await self._changed.wait()
        return None


async def _run(call: OpenCall, send: Send) -> Result:
    return await send(call)


def fingerprint(params: mt.ElicitRequestParams) -> str:
    shown = params.model_dump(mode="json", exclude={"meta"}, by_alias=True)
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:16]
