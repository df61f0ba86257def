"""The agent package's own shape: its modules import each other without a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import agent

ROOT = Path(agent.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every agent module `path` imports, at any depth, `TYPE_CHECKING` blocks included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {name for name in names if name in known}
    return found


def import_graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in ROOT.rglob("*.py")}
    known = set(files)
    # a package's __init__ re-exports its modules; importing from it is not a cycle's edge
    return {name: imports_of(path, known) - {"agent"} for name, path in files.items()}


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for child in sorted(graph.get(name, ())):
            if child != name and (found := visit(child, [*path, name])):
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        if found := visit(name, []):
            return found
    return None


def test_the_agent_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph()
    assert "agent.outcomes" not in graph["agent.state"]
    assert cycle_in(graph) is None, " → ".join(cycle_in(graph) or [])


def test_a_cycle_would_be_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle_in(graph) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None
