"""The seam between the loop and a language model.

Errors::

    LLMError
    ├── ProviderUnavailable   timeout, rate limit, overload, 5xx, connection: try elsewhere
    │                         (carries retry_after when the provider said so)
    ├── ProviderAuthError     401/403: falls back, but someone must fix the key
    ├── ProviderRejected      400 and other request bugs: surfaced, never hidden
    └── AllProvidersFailed    every provider failed; holds each cause
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agent.messages import ChatRequest, ChatResponse


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
