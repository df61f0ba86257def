"""The hosted model first, the local one when the hosted one is down, slow or rate limited.

Within one think step: a timeout, 429, 529, 5xx or connection failure from the hosted
provider is answered by the fallback. A 400 is a bug in our request and is raised. A 401/403
falls back too, but is logged at error level and keeps the hosted provider out for a long
cooldown. While the breaker is open, the hosted provider is not even tried; the breaker lives
in this process unless the host passes one whose state it shares (the service keeps it in
Redis, `breaker_redis`).

A hanging provider costs one request its timeout, not every request in flight: a call that
has heard nothing from the provider for `suspect_after` seconds either becomes the breaker's
one probe or gives up and asks the fallback, and while a probe is out (or after a failure)
every other request goes straight to the fallback. A probe of a provider that has already
failed counts as failed once it is silent for `suspect_after`, so the breaker opens after
one full timeout rather than `failures` of them.

`stream` decides the same way before the first token: a hosted stream that fails to start,
or goes quiet for longer than the timeout, is answered by the local model's stream (after a
`StreamReset` if it had only announced a tool call, so the caller drops its status). One that
breaks after its text was shown keeps that text: the local model is asked to continue it and
does so after one visible sentence (`FINISHED_BY_FALLBACK`); if it cannot, the stream ends
with the shown text as a response cut short (stop reason "cut"), which the loop reports.
Either way the breaker counts the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from agent.llm.base import (
    AllProvidersFailed,
    ChatModel,
    LLMError,
    ProviderAuthError,
    ProviderRejected,
    ProviderUnavailable,
    cut_usage,
)
from agent.llm.breaker import Admission, CircuitBreaker
from agent.llm.streaming import (
    CONTINUE_PROMPT,
    StreamEvent,
    StreamingModel,
    StreamReset,
    TextDelta,
    ToolUseStarted,
    stream_of,
)
from agent.llm.usage import close_model
from agent.messages import ChatRequest, ChatResponse, ContentBlock, Message, TextBlock, Usage

log = logging.getLogger(__name__)

# Said in the answer where the local model takes over a cut one.
FINISHED_BY_FALLBACK = (
    "\n\n_(The connection to my main model broke here; my local model finishes the answer.)_\n\n"
)
_SKIPPED = {"open": "circuit breaker open", "probing": "waiting for a probe to answer"}


class _GaveUp(Exception):
    """The hosted call was silent past the suspicion threshold: another call probes, or this
    one was the probe of a provider that had already failed (`failed` is then True)."""

    def __init__(self, *, failed: bool = False) -> None:
        super().__init__()
        self.failed = failed


@dataclass(kw_only=True)
class _Attempt:
    admission: Admission  # as the call ended up: a call that waited may become the probe
    reason: str | None = None  # why the fallback answers instead; None if the hosted did
    answering: bool = False  # the provider has sent part of an answer (a stream's events)


class FallbackModel(StreamingModel):
    def __init__(
        self,
        primary: ChatModel,
        fallback: ChatModel,
        breaker: CircuitBreaker | None = None,
        *,
        timeout: float,
        suspect_after: float | None = None,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        # in this process unless the host shares one (`breaker_redis.redis_breaker`)
        self.breaker = breaker if breaker is not None else CircuitBreaker(primary.name)
        self.timeout = timeout
        self.suspect_after = min(suspect_after or timeout, timeout)
        self.name = f"{primary.name}+{fallback.name}"
        self._last_answer = -math.inf  # event-loop time of the provider's latest answer
        self._abandoned: set[asyncio.Task[ChatResponse]] = set()  # cancelled, not yet done

    def _forget(self, call: asyncio.Task[ChatResponse]) -> None:
        self._abandoned.discard(call)
        if not call.cancelled():
            call.exception()

    async def close(self) -> None:
        for call in list(self._abandoned):
            call.cancel()
        await asyncio.gather(*self._abandoned, return_exceptions=True)
        await close_model(self.primary)
        await close_model(self.fallback)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        causes: list[Exception] = []
        admission = await self.breaker.admit()
        reason = self._skipped(admission, causes)
        if reason is None:
            async with self._attempt(admission, f"no answer in {self.timeout:.0f} s", causes) as at:
                response, at.admission = await self._hosted(request, admission)
            if at.reason is None:
                return response
            reason = at.reason
        await self.breaker.record_fallback(reason)
        try:
            return await self.fallback.complete(request)
        except LLMError as exc:
            causes.append(exc)
            raise AllProvidersFailed(causes) from exc

    def _skipped(self, admission: Admission, causes: list[Exception]) -> str | None:
        """Why the breaker sends this call straight to the fallback, if it does."""
        if admission not in _SKIPPED:
            return None
        causes.append(ProviderUnavailable(self.primary.name, _SKIPPED[admission]))
        return "breaker_open" if admission == "open" else "probing"

    @contextlib.asynccontextmanager
    async def _attempt(
        self, admission: Admission, silence: str, causes: list[Exception]
    ) -> AsyncIterator[_Attempt]:
        """Record how one hosted attempt went in the breaker. A failure the fallback answers
        ends the block quietly: its cause goes to `causes`, its reason to the attempt."""
        attempt = _Attempt(admission=admission)
        try:
            yield attempt
        except _GaveUp as exc:
            causes.append(ProviderUnavailable(self.primary.name, "not answering"))
            attempt.reason = "suspect"
            if exc.failed:
                log.warning("%s still not answering; using the fallback", self.primary.name)
                await self.breaker.record_failure(reason="not answering")
                attempt.reason = "probe_silent"
        except (GeneratorExit, asyncio.CancelledError):
            # The caller stopped listening (a /cancel, a closed stream): a provider that was
            # answering is up, and a probe left unreported would hold the slot meanwhile.
            if attempt.answering:
                await self.breaker.record_success(attempt.admission)
            raise
        except ProviderRejected:
            # the provider is up; the request is wrong
            await self.breaker.record_success(attempt.admission)
            raise
        except (ProviderAuthError, ProviderUnavailable, TimeoutError) as exc:
            cause, attempt.reason = await self._failed(exc, silence)
            causes.append(cause)
        else:
            await self.breaker.record_success(attempt.admission)

    async def _hosted(
        self, request: ChatRequest, admission: Admission
    ) -> tuple[ChatResponse, Admission]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        suspected = False  # this call made itself the probe while waiting
        call = asyncio.create_task(self.primary.complete(request))
        try:
            async with asyncio.timeout(self.timeout):
                if self.suspect_after < self.timeout:
                    await asyncio.wait({call}, timeout=self.suspect_after)
                    if not call.done() and self._last_answer < started:
                        if admission == "probe":
                            raise _GaveUp(failed=True)  # a failed provider gets no more patience
                        remaining = self.timeout - (loop.time() - started)
                        if not await self.breaker.suspect(remaining + 1.0):
                            raise _GaveUp
                        admission, suspected = "probe", True
                response = await call
        except (ProviderRejected, ProviderAuthError) as exc:
            self._last_answer = loop.time()
            if suspected and isinstance(exc, ProviderRejected):
                await self.breaker.record_success("probe")  # it answered: not hanging after all
            raise
        finally:
            if not call.done():
                # The SDK may take a while to notice; don't make the fallback wait for it.
                call.cancel()
                self._abandoned.add(call)
                call.add_done_callback(self._forget)
            elif not call.cancelled():
                call.exception()  # retrieved here; raised above when it mattered
        self._last_answer = loop.time()
        return response, admission

    async def _failed(self, exc: Exception, silence: str) -> tuple[Exception, str]:
        """Count a hosted failure in the breaker: the cause to keep and the fallback's reason."""
        if isinstance(exc, ProviderAuthError):
            log.error(
                "%s rejected our credentials (%s); using the fallback", exc.provider, exc.reason
            )
            await self.breaker.record_failure(
                cooldown=self.breaker.policy.auth_cooldown,
                reason=f"rejected our credentials ({exc.reason})",
            )
            return exc, "auth"
        await self.breaker.record_failure(
            cooldown=exc.retry_after if isinstance(exc, ProviderUnavailable) else None,
            reason=exc.reason if isinstance(exc, ProviderUnavailable) else silence,
        )
        if isinstance(exc, ProviderUnavailable):
            log.warning("%s unavailable (%s); using the fallback", exc.provider, exc.reason)
            return exc, "unavailable"
        log.warning("%s: %s; using the fallback", self.primary.name, silence)
        return ProviderUnavailable(self.primary.name, silence), "timeout"

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        causes: list[Exception] = []
        admission = await self.breaker.admit()
        reason = self._skipped(admission, causes)
        if reason is None:
            seen = _Seen()
            silence = f"silent for {self.timeout:.0f} s"
            whole: ChatResponse | None = None
            async with (
                contextlib.aclosing(stream_of(self.primary, request)) as events,
                self._attempt(admission, silence, causes) as attempt,
            ):
                while True:
                    # the timeout bounds each wait for the next event, not the answer
                    async with asyncio.timeout(self.timeout):
                        event = await anext(events, None)
                    if event is None:
                        break
                    if isinstance(event, ChatResponse):
                        # Recorded before it goes out: a caller that has the whole answer
                        # closes this generator at once, and a success seen only after that
                        # yield would never be counted (a probe left the breaker suspect).
                        whole = event
                        break
                    seen.saw(event)
                    attempt.answering = True
                    yield event
            if attempt.reason is None:
                if whole is not None:
                    yield whole
                return
            reason = attempt.reason
            if seen.text:  # the caller showed it: keep it, and let the fallback finish it
                async with contextlib.aclosing(self._finish(request, seen, causes)) as rest:
                    async for event in rest:
                        yield event
                return
            if seen.events:
                yield StreamReset(reason)
        await self.breaker.record_fallback(reason)
        try:
            async with contextlib.aclosing(stream_of(self.fallback, request)) as events:
                async for event in events:
                    yield event
        except LLMError as exc:
            causes.append(exc)
            raise AllProvidersFailed(causes) from exc

    async def _finish(
        self, request: ChatRequest, seen: _Seen, causes: list[Exception]
    ) -> AsyncGenerator[StreamEvent, None]:
        """The hosted stream broke after its text was shown: the fallback continues that text,
        after one visible sentence; if it cannot, the shown text ends the stream as "cut"."""
        kept = seen.partial(self.primary.name, causes)
        continued = request.model_copy(
            update={
                "messages": [
                    *request.messages,
                    Message.assistant(seen.text),
                    Message.user(CONTINUE_PROMPT),
                ]
            }
        )
        await self.breaker.record_fallback("cut")
        started = False
        try:
            async with contextlib.aclosing(stream_of(self.fallback, continued)) as events:
                async for event in events:
                    if isinstance(event, ChatResponse):
                        yield _joined(kept, event)
                        return
                    if not started:
                        started = True
                        yield TextDelta(FINISHED_BY_FALLBACK)
                    yield event
        except LLMError as exc:
            if started:
                causes.append(exc)
                raise AllProvidersFailed(causes) from exc
            log.warning("%s could not finish a cut answer (%s)", self.fallback.name, exc)
        yield kept


@dataclass(kw_only=True)
class _Seen:
    """What of a hosted stream the caller has seen: any event, and the answer's text so far
    (text before a tool call is the model's thinking, shown as a status, not kept)."""

    events: bool = False
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def saw(self, event: StreamEvent) -> None:
        self.events = True
        if isinstance(event, TextDelta):
            self.parts.append(event.text)
        elif isinstance(event, ToolUseStarted | StreamReset):
            self.parts.clear()

    def partial(self, provider: str, causes: list[Exception]) -> ChatResponse:
        """The shown text as a response cut short, with the usage the broken stream carried."""
        usage = sum((cut_usage(cause) for cause in causes), Usage())
        return ChatResponse(
            message=Message.assistant(self.text),
            stop_reason="cut",
            usage=usage,
            provider=provider,
        )


def _joined(kept: ChatResponse, rest: ChatResponse) -> ChatResponse:
    """A cut answer and the fallback's continuation of it as one response."""
    text = kept.message.text + FINISHED_BY_FALLBACK + rest.message.text
    content: list[ContentBlock] = [TextBlock(text=text), *rest.message.tool_uses]
    return rest.model_copy(
        update={
            "message": Message(role="assistant", content=content),
            "usage": kept.usage + rest.usage,
        }
    )
