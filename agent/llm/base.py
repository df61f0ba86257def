"""The seam between the loop and a language model.

Errors::

    LLMError
    ├── ProviderUnavailable   timeout, rate limit, overload, 5xx, connection: try elsewhere
    │   │                     (carries retry_after when the provider said so)
    │   └── StreamCut         a stream that broke before the provider said it was done;
    │                         carries what had arrived (`partial`: text, usage)
    ├── ProviderAuthError     401/403: falls back, but someone must fix the key
    ├── ProviderRejected      400 and other request bugs: surfaced, never hidden
    └── AllProvidersFailed    every provider failed; holds each cause
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agent.messages import ChatRequest, ChatResponse, Usage


@runtime_checkable
class ChatModel(Protocol):
    name: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...


class LLMError(Exception):
    """A model call failed."""


class ProviderUnavailable(LLMError):
    def __init__(self, provider: str, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason
        self.retry_after = retry_after


class StreamCut(ProviderUnavailable):
    """A stream that ended before the provider said it was done: a dropped connection, a
    stall, an error event, or a body that simply stopped. `partial` is what had arrived (its
    text, and the usage it carried, missing figures as zero), stop reason "cut"."""

    def __init__(self, provider: str, reason: str, *, partial: ChatResponse) -> None:
        super().__init__(provider, reason)
        self.partial = partial


def cut_usage(exc: BaseException) -> Usage:
    """The usage the cut streams behind an error carried (zero when none was cut)."""
    if isinstance(exc, StreamCut):
        return exc.partial.usage
    total = Usage()
    for cause in getattr(exc, "causes", ()):
        total = total + cut_usage(cause)
    return total


class ProviderAuthError(LLMError):
    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason


class ProviderRejected(LLMError):
    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason


class AllProvidersFailed(LLMError):
    def __init__(self, causes: list[Exception]) -> None:
        super().__init__("every model provider failed")
        self.causes = causes
        self.group = ExceptionGroup("every model provider failed", causes)
