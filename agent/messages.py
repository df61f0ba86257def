"""The one message format the agent loop speaks; providers translate to and from it.

Pydantic models, because RunState persists them as JSON and providers parse wire data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant"]


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True)


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Block):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


class ImageBlock(_Block):
    """An image the user sent, base64-encoded; providers that can see images get it as is."""

    type: Literal["image"] = "image"
    media_type: ImageType
    data: str  # base64 of the image file's bytes
    width: int = 0
    height: int = 0
    name: str = ""


class ThinkingBlock(_Block):
    """A thinking model's reasoning or progress note (Anthropic's current generation). Kept
    exactly as it came, signature and all, because the API wants it back unchanged; never
    shown as the answer. `thinking` is empty when the API was asked to omit its text."""

    type: Literal["thinking"] = "thinking"
    thinking: str = ""
    signature: str = ""


class RedactedThinkingBlock(_Block):
    """Thinking the API returned encrypted: only `data` travels, back to the API unchanged."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: list[ContentBlock]
    # Set by a provider whose model binds its thinking to the request before it (Anthropic's
    # current generation), on the assistant turns it writes: the changing context that
    # request carried after the user turn before this one (sent again there, so the prefix
    # stays as it was), and a digest of that prefix (a turn whose prefix has changed since
    # loses its thinking instead of being refused).
    context: str = ""
    bound_to: str = ""

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=[TextBlock(text=text)])

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [block for block in self.content if isinstance(block, ToolUseBlock)]

    @property
    def thinking(self) -> list[ThinkingBlock | RedactedThinkingBlock]:
        return [b for b in self.content if isinstance(b, ThinkingBlock | RedactedThinkingBlock)]

    @property
    def images(self) -> list[ImageBlock]:
        return [block for block in self.content if isinstance(block, ImageBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [block for block in self.content if isinstance(block, ToolResultBlock)]


class ToolSpec(BaseModel):
    """What a model is told about a tool."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]


class Usage(BaseModel):
    input_tokens: int = 0  # billed in full: the part of the prompt no cache covered
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0  # estimated dollars, filled in by whoever knows the price table

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=self.cost + other.cost,
        )


# Why a model turn ended: the Messages API's reasons, "cut" for a stream that broke after text
# was shown and that nothing finished, "other" for a reason no provider here knows.
StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "refusal",
    "pause_turn",
    "model_context_window_exceeded",
    "cut",
    "other",
]


class ChatRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    system: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 4096
    # How many leading characters of `system` are the same on every call (who Parley is);
    # the rest (time, memories, summary, objective) changes. 0: all of it is stable.
    # Providers with prompt caching keep the changing rest out of the cached prefix.
    system_stable: int = 0


class ChatResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    message: Message
    stop_reason: StopReason
    usage: Usage = Field(default_factory=Usage)
    provider: str = ""
    model: str = ""
    # a tool call the output limit cut midway was left out of `message` (stop_reason max_tokens)
    cut_tool_call: bool = False
