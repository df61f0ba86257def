"""The hosted model first, the local one when the hosted one is down, slow or rate limited.

Within one think step: a timeout, 429, 529, 5xx or connection failure from the hosted
provider is answered by the fallback. A 400 is a bug in our request and is raised. A 401/403
falls back too, but is logged at error level and keeps the hosted provider out for a long
cooldown. While the shared breaker is open, the hosted provider is not even tried.

`stream` decides the same way before the first token: a hosted stream that fails to start,
or goes quiet for longer than the timeout, or dies midway is answered by the local model's
stream — after a `StreamReset`, so the caller replaces the partial text instead of
appending to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator

from agent.llm import metrics
from agent.llm.base import (
    AllProvidersFailed,
    ChatModel,
    LLMError,
    ProviderAuthError,
    ProviderRejected,
    ProviderUnavailable,
)
from agent.llm.breaker import CircuitBreaker
from agent.llm.streaming import StreamEvent, StreamReset, stream_of
from agent.llm.usage import close_model
from agent.messages import ChatRequest, ChatResponse

log = logging.getLogger(__name__)


class FallbackModel:
    def __init__(
        self,
        primary: ChatModel,
        fallback: ChatModel,
        breaker: CircuitBreaker,
        *,
        timeout: float,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.breaker = breaker
        self.timeout = timeout
        self.name = f"{primary.name}+{fallback.name}"

    async def close(self) -> None:
        await close_model(self.primary)
        await close_model(self.fallback)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        causes: list[Exception] = []
        admission = await self.breaker.admit()
        if admission == "open":
            causes.append(ProviderUnavailable(self.primary.name, "circuit breaker open"))
            reason = "breaker_open"
        else:
            try:
                async with asyncio.timeout(self.timeout):
                    response = await self.primary.complete(request)
            except ProviderRejected:
                # the provider is up; the request is wrong
                await self.breaker.record_success(admission)
                raise
            except ProviderAuthError as exc:
                log.error(
                    "%s rejected our credentials (%s); using the fallback", exc.provider, exc.reason
                )
                await self.breaker.record_failure(cooldown=self.breaker.policy.auth_cooldown)
                causes.append(exc)
                reason = "auth"
            except ProviderUnavailable as exc:
                log.warning("%s unavailable (%s); using the fallback", exc.provider, exc.reason)
                await self.breaker.record_failure(cooldown=exc.retry_after)
                causes.append(exc)
                reason = "unavailable"
            except TimeoutError:
                log.warning("%s timed out; using the fallback", self.primary.name)
                await self.breaker.record_failure()
                causes.append(
                    ProviderUnavailable(self.primary.name, f"no answer in {self.timeout:.0f} s")
                )
                reason = "timeout"
            else:
                await self.breaker.record_success(admission)
                return response
        metrics.FALLBACKS.labels(reason).inc()
        try:
            return await self.fallback.complete(request)
        except LLMError as exc:
            causes.append(exc)
            raise AllProvidersFailed(causes) from exc

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        causes: list[Exception] = []
        admission = await self.breaker.admit()
        if admission == "open":
            causes.append(ProviderUnavailable(self.primary.name, "circuit breaker open"))
            reason = "breaker_open"
        else:
            streamed = False
            async with contextlib.aclosing(stream_of(self.primary, request)) as events:
                try:
                    while True:
                        # the timeout bounds each wait for the next event, not the answer
                        async with asyncio.timeout(self.timeout):
                            event = await anext(events, None)
                        if event is None:
                            break
                        streamed = True
                        yield event
                except ProviderRejected:
                    await self.breaker.record_success(admission)
                    raise
                except ProviderAuthError as exc:
                    log.error(
                        "%s rejected our credentials (%s); using the fallback",
                        exc.provider,
                        exc.reason,
                    )
                    await self.breaker.record_failure(cooldown=self.breaker.policy.auth_cooldown)
                    causes.append(exc)
                    reason = "auth"
                except ProviderUnavailable as exc:
                    log.warning(
                        "%s unavailable (%s); streaming from the fallback", exc.provider, exc.reason
                    )
                    await self.breaker.record_failure(cooldown=exc.retry_after)
                    causes.append(exc)
                    reason = "unavailable"
                except TimeoutError:
                    log.warning("%s stream stalled; streaming from the fallback", self.primary.name)
                    await self.breaker.record_failure()
                    causes.append(
                        ProviderUnavailable(self.primary.name, f"silent for {self.timeout:.0f} s")
                    )
                    reason = "timeout"
                else:
                    await self.breaker.record_success(admission)
                    return
            if streamed:
                yield StreamReset(reason)
        metrics.FALLBACKS.labels(reason).inc()
        try:
            async with contextlib.aclosing(stream_of(self.fallback, request)) as events:
                async for event in events:
                    yield event
        except LLMError as exc:
            causes.append(exc)
            raise AllProvidersFailed(causes) from exc
