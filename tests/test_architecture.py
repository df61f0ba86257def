"""The dependency rule, no import circles, and the look at large modules, read with `ast`.

Every import counts: at module level, under `if TYPE_CHECKING:` and inside functions.
Where today's code still breaks a rule, the break is listed in a KNOWN table with why it is
there; a KNOWN entry may only go away. The test fails on a new break, and also when a KNOWN
entry no longer occurs, so the tables can't rot: delete the entry with the fix.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "agent", "memory", "adapters", "loops", "replies")
# A module is split when it holds two jobs, not when it crosses a line count. One past this
# many lines gets a look, and stays only with its reason written in LARGE_MODULES.
LOOK_AT_LINES = 400

# memory may use these agent modules: the recall/store protocols and the neutral message
# types. Both are plain data and protocols (checked below), so they pull in no agent logic.
AGENT_FOR_MEMORY = ("agent.protocols", "agent.messages")

# A feature's parts that speak in the chat (its commands, what its runs check first): these
# may use bot.conversation; the feature's store and loop sit below it.
FEATURE_CHAT = (
    "bot.features.schedules.commands",
    "bot.features.schedules.runs",
    "bot.features.connections.commands",
)


@dataclass(frozen=True)
class Rule:
    """Modules under `source` (but not under `exempt`) must not import modules under
    `forbidden`, except those under `allowed`."""

    name: str
    source: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


RULES = [
    # the loop primitive sits below everything that runs a loop
    Rule(
        name="loops stand below all",
        source=("loops",),
        forbidden=("bot", "agent", "memory", "adapters"),
    ),
    # a Redis reply as text: read by bot, agent and memory alike, so below all of them
    Rule(
        name="replies stand below all",
        source=("replies",),
        forbidden=("bot", "agent", "memory", "adapters", "loops"),
    ),
    Rule(name="only bot composes", source=("agent", "memory", "adapters"), forbidden=("bot",)),
    Rule(name="agent stands alone", source=("agent",), forbidden=("adapters", "memory")),
    Rule(name="adapters only translate", source=("adapters",), forbidden=("agent", "memory")),
    Rule(
        name="memory uses agent's protocols only",
        source=("memory",),
        forbidden=("agent",),
        allowed=AGENT_FOR_MEMORY,
    ),
    Rule(
        name="runtime and ops sit below conversation and wiring",
        source=("bot.runtime", "bot.ops"),
        forbidden=("bot.conversation", "bot.wiring", "bot.cli"),
    ),
    Rule(
        name="runtime sits below the features",
        source=("bot.runtime",),
        forbidden=("bot.features",),
    ),
    Rule(
        name="a feature's store and loop sit below conversation",
        source=("bot.features",),
        forbidden=("bot.conversation",),
        exempt=FEATURE_CHAT,
    ),
    # a feature brings its effects and their handlers (bot/conversation/seam.py): the
    # executor that carries out the core effects gains no import per feature
    Rule(
        name="the executor names no feature",
        source=("bot.conversation.executor",),
        forbidden=("bot.features",),
    ),
    Rule(
        name="conversation and features sit below wiring",
        source=("bot.conversation", "bot.features"),
        forbidden=("bot.wiring", "bot.cli"),
    ),
    Rule(
        name="only wiring and the CLI compose",
        source=("bot", "agent", "memory", "adapters"),
        forbidden=("bot.wiring", "bot.cli"),
        exempt=("bot.wiring", "bot.cli"),
    ),
    Rule(
        name="memory's view of agent is plain data",
        source=AGENT_FOR_MEMORY,
        forbidden=("agent",),
        allowed=AGENT_FOR_MEMORY,
    ),
]

# (importer, imported) → why it is still there. May only shrink.
KNOWN: dict[tuple[str, str], str] = {}

# (importer, imported) → why this import still closes a circle. May only shrink.
KNOWN_CIRCLES: dict[tuple[str, str], str] = {}

# path → why a module over LOOK_AT_LINES is still one job.
LARGE_MODULES: dict[str, str] = {
    "bot/config.py": "one job: the settings contract, one pydantic-settings class per section "
    "(STYLE: one settings class with nested sections), and how a bad value is reported",
    "bot/conversation/executor.py": "one job: carrying out each effect engine.decide returns for "
    "one inbox entry (runs, resumptions, claims, sends); the rules and the sentences are elsewhere",
    "bot/conversation/engine.py": "one job: the conversation's rules as one pure function "
    "(what each event means, which decision it concerns) with every sentence they say",
    "bot/runtime/streaming.py": "one job: one answer shown as it is written and delivered once "
    "under its outbox key (claimed, completed or taken back, whichever run gets there first)",
}


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """Every module `name` imports, resolved to absolute names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            named = {f"{target}.{alias.name}" for alias in node.names}
            # `from bot import wiring` imports the module bot.wiring; from inside bot, that
            # is all it imports (a module's own packages are always loaded before it)
            found.update(named & modules)
            if not (named <= modules and under(name, (target,))):
                found.add(target)
    return found


def edges() -> set[tuple[str, str]]:
    files = sources()
    modules = set(files)
    return {
        (name, target)
        for name, path in files.items()
        for target in imports(name, path, modules)
        if under(target, PACKAGES)
    }


def breaks(rule: Rule, found: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {
        (source, target)
        for source, target in found
        if under(source, rule.source)
        and not under(source, rule.exempt)
        and under(target, rule.forbidden)
        and not under(target, rule.allowed)
    }


def test_the_parser_sees_every_kind_of_import(tmp_path: Path) -> None:
    # A module of each kind the rules rely on, parsed the same way as the real ones.
    path = tmp_path / "probe.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "import bot.config\n"
        "from . import sibling\n"
        "from ..runtime import keys\n"
        "if TYPE_CHECKING:\n"
        "    from bot.wiring.app import serve\n"
        "def later():\n"
        "    from bot import wiring\n"
    )
    found = imports("bot.conversation.probe", path, {"bot.wiring", "bot.conversation.sibling"})
    assert {
        "bot.config",
        "bot.conversation.sibling",
        "bot.runtime",
        "bot.wiring.app",
        "bot.wiring",
    } <= found
    # a module from its own package names that module, not the package it lives in
    assert not {"bot", "bot.conversation"} & found
    other = imports("agent.probe", path, {"bot.wiring", "bot.conversation.sibling"})
    assert {"bot", "bot.wiring"} <= other  # from outside, `from bot import …` loads bot too


def test_every_rule_can_fail() -> None:
    # One made-up import per rule: each must be caught, so no rule is vacuous.
    samples = {
        "loops stand below all": ("loops", "bot.ops.health"),
        "replies stand below all": ("replies", "bot.runtime.codec"),
        "only bot composes": ("adapters.slack", "bot.config"),
        "agent stands alone": ("agent.loop", "memory.store"),
        "adapters only translate": ("adapters.base", "agent.protocols"),
        "memory uses agent's protocols only": ("memory.store", "agent.loop"),
        "runtime and ops sit below conversation and wiring": ("bot.ops.http", "bot.wiring.app"),
        "runtime sits below the features": ("bot.runtime.worker", "bot.features.standing"),
        "a feature's store and loop sit below conversation": (
            "bot.features.schedules.store",
            "bot.conversation.texts",
        ),
        "the executor names no feature": (
            "bot.conversation.executor",
            "bot.features.schedules.runs",
        ),
        "conversation and features sit below wiring": (
            "bot.features.schedules.console",
            "bot.wiring.runtime",
        ),
        "only wiring and the CLI compose": ("bot.runtime.worker", "bot.wiring.runtime"),
        "memory's view of agent is plain data": ("agent.messages", "agent.loop"),
    }
    assert set(samples) == {rule.name for rule in RULES}
    for rule in RULES:
        assert breaks(rule, {samples[rule.name]}), rule.name
    allowed = {
        ("memory.store", "agent.protocols"),
        ("bot.wiring.app", "bot.wiring.runtime"),
        ("bot.cli", "bot.wiring.app"),
        ("bot.conversation.commands", "bot.runtime.keys"),
        ("bot.features.schedules.commands", "bot.conversation.texts"),
        ("bot.conversation.engine", "bot.features.schedules.runs"),
        ("bot.features.reminders", "bot.runtime.outbox"),
        ("bot.wiring.app", "adapters.slack"),
        ("adapters.telegram.ingress", "loops"),
        ("bot.ops.health", "loops"),
        ("memory.counts", "replies"),
        ("agent.mcp.pins", "replies"),
    }
    for rule in RULES:
        assert not breaks(rule, allowed), rule.name


def test_imports_point_one_way() -> None:
    found = edges()
    assert len(found) > 100  # the scan really read the packages
    broken = {edge: rule.name for rule in RULES for edge in breaks(rule, found)}
    new = {edge: name for edge, name in broken.items() if edge not in KNOWN}
    assert not new, f"imports against the dependency rule (docs/architecture.md): {new}"
    fixed = set(KNOWN) - set(broken)
    assert not fixed, f"fixed, so delete from KNOWN: {sorted(fixed)}"


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in `graph` (its modules in order, the first again at the end)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph.get(module, ())):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module)
        if found:
            return found
    return None


def test_the_circle_finder_sees_a_circle() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circles() -> None:
    # Every import counts, `if TYPE_CHECKING:` ones too: a circle there is a circle in the
    # design, only hidden from the interpreter.
    found = edges()
    graph: dict[str, set[str]] = {}
    for source, target in found - set(KNOWN_CIRCLES):
        if source != target:
            graph.setdefault(source, set()).add(target)
    assert circle(graph) is None, (
        f"modules importing each other: {' -> '.join(circle(graph) or [])}"
    )
    closed = {
        (source, target)
        for source, target in set(KNOWN_CIRCLES) & found
        if circle({**graph, source: graph.get(source, set()) | {target}})
    }
    stale = sorted(set(KNOWN_CIRCLES) - closed)
    assert not stale, f"no longer closes a circle, so delete from KNOWN_CIRCLES: {stale}"


def test_a_large_module_has_a_recorded_reason() -> None:
    lines = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sources().values()
    }
    large = {path: n for path, n in lines.items() if n > LOOK_AT_LINES}
    unexplained = {p: n for p, n in large.items() if p not in LARGE_MODULES}
    assert not unexplained, (
        f"modules over {LOOK_AT_LINES} lines: split the one holding two jobs, or record in "
        f"LARGE_MODULES why it is one: {unexplained}"
    )
    stale = sorted(set(LARGE_MODULES) - set(large))
    assert not stale, (
        f"no longer over {LOOK_AT_LINES} lines (or gone), delete from LARGE_MODULES: {stale}"
    )
