"""`pip install .` into a fresh virtual environment gives a `parley` that runs: its help, its
doctor (which says the embedding model is not built yet and how to build it) and its setup
(which builds it). Offline: the wheel is built from a copy of the sources with this
environment's setuptools, and the fresh environment borrows this one's installed
dependencies through a .pth file, so nothing is fetched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from memory.model_build import BUILT_WITH

pytestmark = [pytest.mark.process, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
# the packages the wheel ships, as pyproject.toml lists them ("bot*" → "bot")
PACKAGES = tuple(
    name.rstrip("*")
    for name in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
)
SHIPPED = ("pyproject.toml", "README.md", "LICENSE", *PACKAGES)


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


def test_pip_install_gives_a_parley_that_runs(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in SHIPPED:  # a copy: building writes build/ and *.egg-info beside the sources
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run(*pip, "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index", "-w", "dist", source, cwd=tmp_path)  # fmt: skip
    [wheel] = (tmp_path / "dist").glob("parley-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith("/METADATA")))
        assert any(n.endswith("assets/all-MiniLM-L6-v2-tokenizer.json") for n in archive.namelist())
    for name, pinned in BUILT_WITH.items():  # what builds the pinned model comes with it
        assert f"Requires-Dist: {name}=={pinned}".encode() in metadata

    fresh = tmp_path / "fresh"
    run(sys.executable, "-m", "venv", "--without-pip", fresh, cwd=tmp_path)
    python = fresh / "bin" / "python"
    run(*pip, "--python", python, "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    site = run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
    )
    (Path(site.strip()) / "parley-test-deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )

    home = tmp_path / "home"  # no .env, no settings, no model
    home.mkdir()
    env = {
        "PATH": f"{fresh / 'bin'}:{os.environ['PATH']}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PARLEY_DATA_DIR": str(home / "data"),
        "OLLAMA_HOST": "http://127.0.0.1:9",  # nothing listens there
    }
    parley = fresh / "bin" / "parley"
    assert "setup" in run(parley, "--help", cwd=home, env=env)
    where = run(python, "-c", "import bot; print(bot.__file__)", cwd=home, env=env)
    assert where.startswith(str(fresh)), where  # the installed copy, not the checkout

    doctor = subprocess.run(
        [parley, "doctor"], cwd=home, env=env, capture_output=True, text=True, timeout=120
    )
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr  # no model provider here
    model = fresh / "share" / "parley" / "all-MiniLM-L6-v2-int8-dynamic.onnx"
    assert (
        f"warn            embeddings the embedding model is not built yet (it goes to {model})"
        in doctor.stdout
    )
    assert "-> run `parley setup` to build it now" in doctor.stdout
    assert "Traceback" not in doctor.stdout + doctor.stderr
    # a wheel has no Makefile and no .env.example: no hint sends its user to them
    said = doctor.stdout + doctor.stderr
    assert "make setup` (it installs" not in said and "copy .env.example" not in said, said
    assert "settings are read from the environment or from .env in this directory" in said

    built = run(parley, "setup", cwd=home, env=env)
    assert built.startswith(f"embedding model ready: {model}")
    assert model.exists()
