"""An MCP server's tool as a Parley `Tool`: its name, schema check, approval class and results.

The model sees `<server>__<tool>`, cut to Anthropic's tool-name rule; the tool keeps the
server's own name for the call. Arguments are checked against the server's JSON schema before
the call, and a failed check reads like any other invalid-arguments observation. A schema that
is not valid JSON Schema raises `BadSchema`: such a tool is left out (a provider refuses a
whole request that offers it). A schema is the server's, so not trusted: its `pattern`s are
matched with a time limit (a backtracking pattern would hold the event loop), and one that
fails in use (a `$ref` to nothing) is an invalid-arguments observation for that tool only.
A `$ref` resolves inside the schema only: checking arguments never fetches anything (a
network `$ref` would be a request to an address the server chose, before any approval).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import mcp.types as mt
import regex
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

from agent.mcp.config import Approval, ServerConfig
from agent.mcp.elicitation import Answers, Progress, again, answered, question
from agent.mcp.following import FollowedTask, Handoff, TaskFollower
from agent.mcp.open_calls import ENDED, RESTARTED, WAITED, CallClosed
from agent.messages import ToolSpec
from agent.observations import clean
from agent.tools import Tool, ToolContext, ToolError

log = logging.getLogger(__name__)


class Caller(Protocol):
    def __call__(
        self,
        tool: str,
        args: dict[str, Any],
        answers: Answers | None,
        progress: Progress | None,
        handoff: Handoff | None = None,
    ) -> Awaitable[mt.CallToolResult | mt.InputRequiredResult]: ...


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
MAX_NAME = 64
MAX_DESCRIPTION = 2000  # characters of a server's tool description the model sees
HANDOFF_MARGIN = 2.0  # seconds before its timeout a long task goes to the follower


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` within ^[a-zA-Z0-9_-]{1,64}$; a digest keeps altered names apart."""
    wanted = f"{server}__{tool}"
    safe = _UNSAFE.sub("_", wanted)
    if safe == wanted and len(safe) <= MAX_NAME:
        return safe
    digest = hashlib.sha1(wanted.encode()).hexdigest()[:8]
    return f"{safe[: MAX_NAME - 9]}_{digest}"


def is_side_effecting(tool: mt.Tool, approval: Approval) -> bool:
    """`auto`: only a tool annotated readOnlyHint: true runs without approval."""
    if approval == "always":
        return True
    if approval == "never":
        return False
    return not (tool.annotations is not None and tool.annotations.read_only_hint is True)


def shown_digest(server: str, tool: mt.Tool) -> str:
    """What a person approving the tool was shown or relied on: its names, description,
    input schema and annotations, as one SHA-256."""
    shown = {
        "server": server,
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations.model_dump(mode="json") if tool.annotations else None,
    }
    text = json.dumps(shown, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _problem(error: schema_errors.ValidationError) -> str:
    """What is wrong, without echoing the (possibly secret) value that was given."""
    if error.validator in ("required", "additionalProperties", "enum", "const", "pattern"):
        return str(error.message)[:200]
    if error.validator == "type":
        return f"must be of type {error.validator_value}"
    return f"does not satisfy {error.validator}={json.dumps(error.validator_value)[:80]}"


PATTERN_SECONDS = 0.2  # matching one value against one of a server's patterns


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    """`pattern`, matched with a time limit and without holding the GIL."""
    if not validator.is_type(instance, "string"):
        return
    try:
        found = regex.search(pattern, instance, timeout=PATTERN_SECONDS, concurrent=True)
    except TimeoutError:
        yield schema_errors.ValidationError("took too long to match the schema's pattern")
        return
    except regex.error:
        yield schema_errors.ValidationError("cannot be checked: the schema's pattern is unusable")
        return
    if found is None:
        yield schema_errors.ValidationError(f"does not match {pattern!r}")


def _never_fetched(uri: str) -> Any:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


# the meta-schemas, and nothing else: a reference outside the schema stays unresolved
LOCAL_ONLY = SPECIFICATIONS.combine(Registry(retrieve=_never_fetched))  # type: ignore[call-arg]


class BadSchema(Exception):
    """A tool's inputSchema is not valid JSON Schema; the message says where."""


class McpTool(Tool):
    """One remote tool. Built from the server's listing, not from a Python signature."""

    def __init__(
        self,
        *,
        server: str,
        remote: mt.Tool,
        caller: Caller,
        approval: Approval = "auto",
        timeout: float | None = None,
        standing: bool = False,
    ) -> None:
        # Tool.__init__ derives everything from a Python signature; here the server supplies it.
        self.server = server
        self.remote_name = remote.name
        self.name = tool_name(server, remote.name)
        description = (remote.description or remote.title or remote.name).strip()
        self.description = description[:MAX_DESCRIPTION]
        self.category = f"mcp:{server}"
        self.side_effects = is_side_effecting(remote, approval)
        self.shown = shown_digest(server, remote)
        self.standing_digest = self.shown if standing else None
        self.timeout = timeout
        # a side-effecting call is never repeated on its own: it may have happened
        self.retries = 0 if self.side_effects else None
        # made again when the open call of its question is gone: only when that is safe
        hints = remote.annotations
        self.repeatable = hints is not None and (
            hints.read_only_hint is True or hints.idempotent_hint is True
        )
        self._describe = None
        self._context_param = None
        self.deps = {}  # nothing from the host: the server has what it needs
        self._caller = caller
        schema = dict(remote.input_schema or {"type": "object"})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.schema = schema
        cls = validators.validator_for(schema, default=validators.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except schema_errors.SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "the top level"
            raise BadSchema(f"{where}: {str(exc.message)[:120]}") from None
        except Exception as exc:  # too deep to check, say
            raise BadSchema(f"the top level: cannot be checked ({type(exc).__name__})") from None
        self._validator = validators.extend(cls, {"pattern": _pattern})(schema, registry=LOCAL_ONLY)
        self._spec = ToolSpec(name=self.name, description=self.description, input_schema=schema)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            found = list(self._validator.iter_errors(args))
        except Exception as exc:  # the schema fails in use: a $ref to nothing, say
            problem = f"the server's input schema cannot be used ({type(exc).__name__})"
            raise ValidationError.from_exception_data(
                self.name,
                [InitErrorDetails(type=PydanticCustomError("schema", problem), input=None)],
            ) from None
        errors = sorted(found, key=lambda e: list(e.absolute_path))
        if errors:
            raise ValidationError.from_exception_data(
                self.name,
                [
                    InitErrorDetails(
                        type=PydanticCustomError("schema", _problem(error)),
                        loc=tuple(error.absolute_path),
                        input=None,
                    )
                    for error in errors[:5]
                ],
            )
        return dict(args)

    def normalize(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments with the schema's top-level defaults filled in."""
        filled = dict(self.validate(args))
        for key, prop in self.schema.get("properties", {}).items():
            if key not in filled and isinstance(prop, dict) and "default" in prop:
                filled[key] = prop["default"]
        return json.loads(json.dumps(filled, default=str))

    async def __call__(self, args: dict[str, Any], context: ToolContext) -> Any:
        answers = answered(context.resume) if context.resume else None
        progress = _progress(self.server, context.progress) if context.progress else None
        checked = self.validate(args)
        handoff = self._handoff(context)
        try:
            result = await self._caller(self.remote_name, checked, answers, progress, handoff)
        except CallClosed as closed:  # the call that asked could not stay open
            assert answers is not None and context.resume
            if not self.repeatable:
                raise ToolError(self._closed(closed, context.resume)) from None
            log.info("MCP %s: the call that asked is gone (%s); made again", self.name, closed.why)
            again_with = again(context.resume, answers)
            result = await self._caller(self.remote_name, checked, again_with, progress, handoff)
        if isinstance(result, mt.InputRequiredResult):  # the server asks the requester first
            raise question(self.server, result)
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or "the server reported an error")
        return text or "done"

    def _closed(self, closed: CallClosed, resume: Mapping[str, Any]) -> str:
        """What the model (and so the person) is told when an answer came too late for a
        call that is not safe to make again."""
        why = {
            RESTARTED: "Parley restarted while the question waited, which ended the call",
            WAITED: f"no answer came within {resume.get('wait', 0):.0f} seconds, so "
            f"{self.server} was told the question was dismissed",
            ENDED: f"{self.server} ended the call before the answer came",
        }[closed.why]
        text = f"The answer came too late for {self.remote_name}: {why}."
        if closed.result is not None:
            said = result_text(closed.result)[:500] or "nothing"
            text += f" Without the answer, {self.server} replied: {said}"
        return text + (
            f" {self.remote_name} may change things, so Parley did not make the call again. "
            "Tell the user, and ask whether to try again."
        )

    def _handoff(self, context: ToolContext) -> Handoff | None:
        """A long task goes to the host's follower shortly before this call would time out;
        its result then goes where this run's answer goes (the requester alone, if private)."""
        follower = context.deps.get(TaskFollower)
        if not isinstance(follower, TaskFollower) or self.timeout is None:
            return None
        run = context.run

        async def follow(task_id: str, poll_ms: int | None, ttl_ms: int | None) -> None:
            task = FollowedTask(
                task_id=task_id,
                server=self.server,
                tool=self.remote_name,
                conversation_id=run.conversation_id,
                user_id=run.user_id,
                user_name=run.user_name,
                private_to=context.private_to,
                poll_ms=poll_ms,
                ttl_ms=ttl_ms,
                created_at=time.time(),
            )
            await follower.follow(task)

        return Handoff(after=self.timeout - min(HANDOFF_MARGIN, self.timeout / 4), follow=follow)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, side_effects={self.side_effects})"


async def list_all(session: Any) -> list[mt.Tool]:
    """Every tool a server lists (a `ClientSession`), page after page (at most 100)."""
    listed: list[mt.Tool] = []
    params: mt.PaginatedRequestParams | None = None
    for _ in range(100):
        page = await session.list_tools(params=params)
        listed += page.tools
        if not page.next_cursor:
            break
        params = mt.PaginatedRequestParams(cursor=page.next_cursor)
    return listed


def build_tools(
    server: str,
    config: ServerConfig,
    listed: list[mt.Tool],
    caller: Caller,
    *,
    timeout: float,
    reported: dict[str, str],
    pinned: dict[str, tuple[bool, bool]] | None = None,
) -> tuple[list[McpTool], dict[str, str]]:
    """A server's listed tools as Parley tools, and those left out (name → why; a new reason
    is logged, one in `reported` already was). `pinned`: each tool's approval class as first
    listed, which a later listing may tighten and never loosen (see `pin`)."""
    tools: list[McpTool] = []
    skipped: dict[str, str] = {}
    for tool in listed:
        try:
            made = McpTool(
                server=server,
                remote=tool,
                caller=caller,
                approval=config.approval,
                timeout=timeout,
                standing=config.standing,
            )
        except BadSchema as exc:
            skipped[tool.name] = f"invalid input schema at {exc}"
            if reported.get(tool.name) != skipped[tool.name]:  # once, not every relist
                log.warning(
                    "MCP server %s: tool %s left out, its input schema is not valid "
                    "JSON Schema (%s)",
                    server,
                    tool.name,
                    exc,
                )
            continue
        if pinned is not None:
            pin(made, pinned)
        tools.append(made)
    return tools, skipped


def pin(tool: McpTool, pinned: dict[str, tuple[bool, bool]]) -> None:
    """Hold `tool` to its approval class as first listed (needs approval; safe to call
    again): a server that relists a reviewed tool as read-only gets no run without approval
    from it. Tightening is taken; loosening is refused and logged."""
    first = pinned.setdefault(tool.remote_name, (tool.side_effects, tool.repeatable))
    if first[0] and not tool.side_effects:
        log.warning(
            "MCP server %s: tool %s now says it is read-only; it did not when first listed, "
            "so it still needs approval",
            tool.server,
            tool.remote_name,
        )
        tool.side_effects, tool.retries = True, 0
    tool.repeatable = tool.repeatable and first[1]
    pinned[tool.remote_name] = (tool.side_effects, tool.repeatable)


def result_text(result: mt.CallToolResult) -> str:
    """Text content as is; images, audio and resources summarised; else structured content."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            parts.append(block.text)
        elif isinstance(block, mt.ImageContent | mt.AudioContent):
            kind = "image" if isinstance(block, mt.ImageContent) else "audio"
            size = len(block.data) * 3 // 4
            parts.append(f"[{kind}: {block.mime_type}, about {size} bytes, not shown]")
        elif isinstance(block, mt.EmbeddedResource):
            inner = block.resource
            if isinstance(inner, mt.TextResourceContents):
                parts.append(f"[resource {inner.uri}]\n{inner.text}")
            else:
                mime = inner.mime_type or "binary"
                parts.append(f"[resource {inner.uri}: {mime}, not shown]")
        elif isinstance(block, mt.ResourceLink):
            parts.append(f"[link to resource {block.uri}: {block.name}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def _progress(server: str, show: Callable[[str], Awaitable[None]]) -> Progress:
    """A server's progress notifications as a status line: its message, else "3/10"."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        await show(f"{server}: {clean(message, 120) if message else done}")

    return report
