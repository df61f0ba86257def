"""Tools: typed async functions the model can call, and the registry that holds them.

A tool's JSON schema comes from its type hints (through a pydantic model built from the
signature) and its docstring (Google, NumPy or reST style); parameters annotated
`ToolContext` or `Dep[SomeType]` (`deps`) are injected and not part of the schema. Tools that
change the world declare `side_effects=True` and never run without a human approval.

Errors::

    ToolError                 permanent: the model sees it as an error observation
    ├── TransientToolError    retried with exponential backoff and jitter
    └── ToolLoadError         a skills file or entry point could not be loaded

`ApprovalRequired` is not an error but a signal (as in pydantic-ai): a read-only tool that
finds, while it runs, that this call needs a person's yes raises it; the call then waits in
the turn's plan like a side-effecting one and runs again with `ToolContext.approved`.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypedDict, TypeVar, Unpack, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model

from agent.deps import MissingDependency, ToolContext, dependency_type
from agent.messages import ToolSpec
from agent.protocols import RunContext

log = logging.getLogger(__name__)

# `True` for a tool that always changes the world; a predicate over a call's arguments (and,
# if it takes a second parameter, the run's RunContext) for one that does only for some
# calls (remembering privately vs in a shared chat).
Predicate = Callable[[dict[str, Any]], bool] | Callable[[dict[str, Any], RunContext], bool]
SideEffects = bool | Predicate
# A call's one-line description for approval prompts, from its arguments (and run context).
Describe = Callable[[dict[str, Any]], str] | Callable[[dict[str, Any], RunContext | None], str]
T = TypeVar("T")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class ToolError(Exception):
    """A tool failed in a way worth telling the model; the message is shown to it."""


class TransientToolError(ToolError):
    """A failure that may pass: the call is retried."""


class ToolLoadError(ToolError):
    """A third-party tool could not be loaded."""


class ApprovalRequired(Exception):  # noqa: N818 - a signal, not an error
    """This call needs the requester's yes before it may give its result.

    `description` is what the approval prompt says about the call; `private`: its result is
    for the requester alone, so once it ran the run answers the requester privately."""

    def __init__(self, description: str, *, private: bool = False) -> None:
        super().__init__(description)
        self.description = description
        self.private = private


class QuestionRequired(Exception):  # noqa: N818 - a signal, not an error
    """This call cannot go on until the requester does something outside the chat (connect
    an account): the run waits as for a question, with `link` as a URL button sent to them
    privately. `question_id` is the pending question's id, known before the link is made so
    the link can be bound to it."""

    def __init__(self, question: str, *, question_id: str, label: str, url: str) -> None:
        super().__init__(question)
        self.question = question
        self.question_id = question_id
        self.label = label
        self.url = url


class InputRequired(Exception):  # noqa: N818 - a signal, not an error
    """The call needs the requester's answer first (MCP elicitation): the run waits, then
    calls again with `ToolContext.resume` = `resume` (JSON, kept) plus "answer"."""

    def __init__(self, question: str, *, options: list[str], resume: dict[str, Any]) -> None:
        super().__init__(question)
        self.question, self.options, self.resume = question, options, resume


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description and the per-parameter descriptions of a Google, NumPy or reST
    docstring (the style is detected)."""
    parsed = docstring_parser.parse(doc)
    params = {
        param.arg_name: " ".join(line.strip() for line in param.description.splitlines())
        for param in parsed.params
        if param.description
    }
    return (parsed.description or "").strip(), params


class Tool:
    """A callable the model may use, with its argument model and metadata."""

    side_effects: bool = False
    standing_digest: str | None = None  # approvable for good: a digest of what was shown
    shown: str | None = None  # that digest for any MCP tool: what a schedule's permission binds
    # Decides per call for a tool whose side effects depend on its arguments.
    _side_effects_when: Predicate | None = None
    _predicate_reads_run = False

    def __init__(
        self,
        fn: Callable[..., Awaitable[Any]],
        *,
        name: str | None = None,
        description: str | None = None,
        category: str = "general",
        side_effects: SideEffects = False,
        timeout: float | None = None,
        retries: int | None = None,
        describe: Describe | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn.__name__!r} must be an async function")
        self.fn = fn
        self.name = name or fn.__name__
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_NAME.pattern}")
        summary, param_docs = _parse_docstring(fn.__doc__ or "")
        self.description = description or summary or self.name
        self.category = category
        # May this tool change the world? A predicate decides per call (by its arguments).
        self.side_effects = bool(side_effects)
        self._side_effects_when = side_effects if callable(side_effects) else None
        if self._side_effects_when is not None:
            positional = [
                p
                for p in inspect.signature(self._side_effects_when).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            self._predicate_reads_run = len(positional) >= 2
        self.timeout = timeout
        self.retries = retries
        self._describe = describe
        # A describer may take the run's context too (who asks, where, their time zone).
        self._describe_in_context = describe is not None and (
            len(inspect.signature(describe).parameters) > 1
        )
        self._context_param: str | None = None
        self.deps: dict[str, type[Any]] = {}  # parameters injected from the host's objects
        self.args_model = self._build_args_model(param_docs)
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        self._spec = ToolSpec(name=self.name, description=self.description, input_schema=schema)

    def needs_approval(self, args: dict[str, Any], run: RunContext | None = None) -> bool:
        """Whether this call changes the world, and so runs only after a person's yes
        (`run`: where it would run; a predicate that needs it asks when it is unknown)."""
        when = self._side_effects_when
        if when is None:
            return self.side_effects
        if self._predicate_reads_run:
            return True if run is None else bool(when(args, run))  # type: ignore[call-arg]
        return bool(when(args))  # type: ignore[call-arg]

    def _build_args_model(self, param_docs: dict[str, str]) -> type[BaseModel]:
        hints = get_type_hints(self.fn, include_extras=True)
        fields: dict[str, Any] = {}
        for param in inspect.signature(self.fn).parameters.values():
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext:
                self._context_param = param.name
                continue
            if (kind := dependency_type(annotation)) is not None:
                self.deps[param.name] = kind
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args/**kwargs cannot be described")
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (
                annotation,
                Field(default, description=param_docs.get(param.name)),
            )
        return create_model(f"{self.name}_args", __base__=_Args, **fields)

    def spec(self) -> ToolSpec:
        return self._spec

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments for the function; raises pydantic.ValidationError."""
        model = self.args_model.model_validate(args)
        return {name: getattr(model, name) for name in type(model).model_fields}

    def normalize(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as JSON with defaults filled in, for comparing two calls."""
        return self.args_model.model_validate(args).model_dump(mode="json")

    def describe_call(self, args: dict[str, Any], context: RunContext | None = None) -> str:
        """A one-line human description of a call, shown in approval plans."""
        if self._describe is not None:
            try:
                if self._describe_in_context:
                    return self._describe(args, context)  # type: ignore[call-arg]
                return self._describe(args)  # type: ignore[call-arg]
            except Exception:  # a describer bug must not hide the call from the approver
                log.warning("describe() of tool %s failed", self.name, exc_info=True)
        rendered = ", ".join(f"{key}={value!r}" for key, value in args.items())
        line = f"{self.name.replace('_', ' ')}({rendered})"
        return line if len(line) <= 200 else line[:199] + "…"

    async def __call__(self, args: dict[str, Any], context: ToolContext) -> Any:
        kwargs = self.validate(args)
        if self._context_param:
            kwargs[self._context_param] = context
        for param, kind in self.deps.items():
            if kind not in context.deps:
                raise MissingDependency(self.name, kind)
            kwargs[param] = context.deps[kind]
        return await self.fn(**kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, side_effects={self.side_effects})"


class ToolOptions(TypedDict, total=False):
    """What `tool(...)` passes on to `Tool`."""

    name: str | None
    description: str | None
    category: str
    side_effects: SideEffects
    timeout: float | None
    retries: int | None
    describe: Describe | None


@overload
def tool(fn: Callable[..., Awaitable[Any]], /) -> Tool: ...


@overload
def tool(
    fn: None = None, /, **options: Unpack[ToolOptions]
) -> Callable[[Callable[..., Awaitable[Any]]], Tool]: ...


def tool(
    fn: Callable[..., Awaitable[Any]] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool | Callable[[Callable[..., Awaitable[Any]]], Tool]:
    """Make a typed async function a tool: `@tool` or `@tool(side_effects=True, ...)`."""

    def wrap(func: Callable[..., Awaitable[Any]]) -> Tool:
        return Tool(func, **options)

    return wrap(fn) if fn is not None else wrap


def _tools_in(obj: Any) -> list[Tool]:
    """Tools found in what an entry point or skills file offers."""
    if isinstance(obj, Tool):
        return [obj]
    if isinstance(obj, ToolRegistry):
        return obj.tools()
    if isinstance(obj, ModuleType):
        return [value for value in vars(obj).values() if isinstance(value, Tool)]
    if isinstance(obj, Iterable) and not isinstance(obj, str | bytes):
        found = list(obj)
        if all(isinstance(item, Tool) for item in found):
            return found
    raise ToolLoadError(f"{obj!r} is not a tool, a list of tools, a module or a registry")


class ToolSource(Protocol):
    """More tools for one conversation (MCP servers' tools), asked for at each run segment;
    a source that must look something up (whose account is connected) answers awaitably."""

    def tools_for(self, context: RunContext) -> Iterable[Tool] | Awaitable[Iterable[Tool]]: ...


async def offered_by(source: ToolSource, context: RunContext) -> list[Tool]:
    found = source.tools_for(context)
    return list(await found if inspect.isawaitable(found) else found)


class ToolRegistry:
    """The tools an agent may use, by unique name.

    `version` counts registrations, so whoever derives something from the tools (their specs,
    the context they take up) can tell when to derive it again.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.deps: dict[type[Any], object] = {}  # the host's objects, for `Dep[...]`
        self.version = 0
        self._specs: tuple[int, list[ToolSpec]] = (0, [])
        for item in tools:
            self.register(item)

    def with_tools(self, extra: Iterable[Tool]) -> ToolRegistry:
        """A new registry: these tools plus `extra`; an extra one never replaces a built-in."""
        combined = ToolRegistry(self._tools.values())
        combined.deps = dict(self.deps)
        for item in extra:
            if item.name in combined:
                log.warning("tool %s is already defined; ignoring the other one", item.name)
            else:
                combined.register(item)
        return combined

    def register(self, item: Tool) -> Tool:
        if item.name in self._tools:
            raise ValueError(f"a tool named {item.name!r} is already registered")
        self._tools[item.name] = item
        self.version += 1
        return item

    def provide(self, kind: type[T], instance: T) -> None:
        """Hand `instance` to every tool parameter annotated `Dep[kind]`."""
        self.deps[kind] = instance
        self.version += 1

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool named {name!r}") from None

    def has(self, name: str) -> bool:
        return name in self._tools

    def tools(self, category: str | None = None) -> list[Tool]:
        """The registered tools, or those of one category."""
        return [t for t in self._tools.values() if category is None or t.category == category]

    def specs(self) -> list[ToolSpec]:
        """The specs offered to the model; one shared list until the next registration."""
        version, specs = self._specs
        if version != self.version:
            specs = [t.spec() for t in self._tools.values()]
            self._specs = (self.version, specs)
        return specs

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def load_entry_points(self, group: str = "parley.tools") -> list[str]:
        """Register the tools that installed packages offer; returns their names."""
        names: list[str] = []
        for point in entry_points(group=group):
            try:
                loaded = point.load()
            except Exception as exc:
                raise ToolLoadError(f"entry point {point.name!r} failed to load: {exc}") from exc
            for item in _tools_in(loaded):
                names.append(self.register(item).name)
        log.info("loaded %d tools from entry point group %s", len(names), group)
        return names

    def load_skills_dir(self, path: str | Path) -> list[str]:
        """Register the tools defined at module level in each `*.py` file of a folder."""
        folder = Path(path)
        if not folder.is_dir():
            raise ToolLoadError(f"skills folder {folder} does not exist")
        names: list[str] = []
        for file in sorted(folder.glob("*.py")):
            if file.name.startswith("_"):
                continue
            module_name = f"parley_skills.{file.stem}"
            spec = importlib.util.spec_from_file_location(module_name, file)
            if spec is None or spec.loader is None:
                raise ToolLoadError(f"cannot import skills file {file}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                sys.modules.pop(module_name, None)
                raise ToolLoadError(f"skills file {file.name} failed to load: {exc}") from exc
            for item in _tools_in(module):
                names.append(self.register(item).name)
        log.info("loaded %d tools from skills folder %s", len(names), folder)
        return names
