"""The repository's documents against the repository: the licence file matches
pyproject.toml, the README credits the bundled model's notice, and every file the docs name
exists (so moving a module without updating the docs fails here)."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    "README.md",
    "DEVELOPERS.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
]
SKIP_DIRS = {".git", ".venv", ".deps", ".parley", ".mypy_cache", ".ruff_cache", "__pycache__"}

# SPDX id in pyproject.toml → a phrase only that licence's text carries.
LICENCE_TEXT = {
    "Apache-2.0": "Apache License\n                           Version 2.0, January 2004",
    "MIT": "Permission is hereby granted, free of charge",
}

# A backticked name that looks like a file or folder: a path with a slash, or a file name
# with one of the extensions the repository uses.
PATHLIKE = re.compile(r"[\w.*-]+(/[\w.*-]*)+|[\w.-]+\.(py|md|ya?ml|json|jsonl|toml|txt|conf|sh)")


def repository_paths() -> set[str]:
    """Every file and folder in the work tree, relative to its root."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        relative = Path(folder).relative_to(ROOT)
        if str(relative) != ".":
            found.add(relative.as_posix())
        found.update((relative / name).as_posix().removeprefix("./") for name in files)
    return found


def mentioned_paths(text: str) -> set[str]:
    names = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        if "://" in span or span.startswith(("$", "-", "~", "/")) or " " in span:
            continue
        if span.split("/")[0] in SKIP_DIRS:  # made by setup or at run time
            continue
        if PATHLIKE.fullmatch(span):
            names.add(span)
    return names


def resolves(name: str, paths: set[str]) -> bool:
    """Relative to the root, or — for a name given relative to where the text is about
    (`k8s/` under deploy, `slack_format.py` beside the adapters) — as the tail of a path."""
    name = name.rstrip("/")
    while name.startswith("../"):
        name = name[3:]
    if "*" in name:
        pattern = re.compile(re.escape(name).replace(r"\*", "[^/]*") + "$")
        return any(pattern.search(path) for path in paths)
    return name in paths or any(path.endswith("/" + name) for path in paths)


def test_licence_file_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    licence = project["license"]
    assert licence in LICENCE_TEXT, f"no known text for licence {licence!r}"
    assert LICENCE_TEXT[licence] in (ROOT / "LICENSE").read_text()


def test_readme_names_the_licence_and_the_bundled_models_notice() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "`LICENSE`" in readme
    assert "`memory/assets/NOTICE`" in readme
    notice = (ROOT / "memory" / "assets" / "NOTICE").read_text()
    assert "Apache License 2.0" in notice
    for name in re.findall(r"^\s+(\S+\.json)\s+[0-9a-f]{64}$", notice, re.MULTILINE):
        assert (ROOT / "memory" / "assets" / name).exists(), name


def test_the_docs_name_only_files_that_exist() -> None:
    paths = repository_paths()
    assert "bot/runtime/keys.py" in paths and "docs/architecture.md" in paths
    mentioned = {doc: mentioned_paths((ROOT / doc).read_text()) for doc in DOCS}
    assert sum(map(len, mentioned.values())) > 50  # the scan really read the docs
    missing = {
        doc: sorted(name for name in names if not resolves(name, paths))
        for doc, names in mentioned.items()
    }
    assert not {doc: names for doc, names in missing.items() if names}


def test_the_docs_keep_to_the_repository() -> None:
    # The architecture lives in docs/architecture.md, not in a file outside the project.
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        assert "../shared" not in text and "DESIGN.md" not in text, doc
    developers = (ROOT / "DEVELOPERS.md").read_text()
    assert "`docs/architecture.md`" in developers


def test_the_path_check_catches_a_moved_module() -> None:
    paths = {"bot", "bot/runtime", "bot/runtime/keys.py", "deploy/k8s", "adapters/slack_format.py"}
    assert mentioned_paths("see `bot/keys.py`, `k8s/` and `slack_format.py`; run `make test`") == {
        "bot/keys.py",
        "k8s/",
        "slack_format.py",
    }
    assert not resolves("bot/keys.py", paths)
    assert resolves("bot/runtime/keys.py", paths)
    assert resolves("k8s/", paths) and resolves("slack_format.py", paths)
    assert not resolves("conductor.py", paths)


def test_the_readme_and_the_architecture_say_which_test_tier_to_run_when() -> None:
    """A newcomer reads when to run each tier; the architecture page what each holds."""
    for name in ("README.md", "docs/architecture.md"):
        text = " ".join((ROOT / name).read_text(encoding="utf-8").split())
        assert re.search(r"`make test-fast`.{0,400}every edit", text), name
        assert re.search(
            r"before a push.{0,60}`make test`|`make test`.{0,600}before a push", text, re.I
        )
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tiers = architecture.split("## Which tests to run when", 1)[1]
    for holds in ("no Redis, network or child process", "real Redis", "tests/e2e/"):
        assert holds in tiers
