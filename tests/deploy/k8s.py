"""Reading the Kubernetes manifests: files, kustomizations and the pods they describe."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
WORKLOADS = {"Deployment", "StatefulSet", "Job", "DaemonSet"}


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def name_of(resource: dict[str, Any]) -> str:
    return f"{resource['kind']}/{resource['metadata']['name']}"


def kustomization(folder: Path) -> dict[str, Any]:
    return load(folder / "kustomization.yaml")[0]


def kustomize_folders() -> list[Path]:
    return sorted(path.parent for path in K8S.rglob("kustomization.yaml"))


def collect(folder: Path) -> dict[str, dict[str, Any]]:
    """Every resource a kustomization (or component) brings in, by Kind/name, unpatched."""
    found: dict[str, dict[str, Any]] = {}
    spec = kustomization(folder)
    for entry in [*spec.get("resources", []), *spec.get("components", [])]:
        target = (folder / entry).resolve()
        if target.is_dir():
            found.update(collect(target))
        else:
            found.update({name_of(r): r for r in load(target)})
    return found


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def kubectl() -> str | None:
    return shutil.which("kubectl")


def render(folder: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` (kustomize built into kubectl); offline."""
    binary = kubectl()
    assert binary is not None
    out = subprocess.run(
        [binary, "kustomize", str(folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": os.devnull},
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]
