"""The Kubernetes manifests validate, pass the Pod Security "restricted" profile, and agree
with the code: variables, secrets, ports, stream names and drain times."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes_validate import utils as kv
from pydantic import SecretStr

from bot.cli import COMMANDS
from bot.config import Settings, all_variables
from bot.runtime.keys import Keys
from bot.runtime.worker import GROUP
from tests.deploy.k8s import (
    K8S,
    ROOT,
    WORKLOADS,
    collect,
    kubectl,
    kustomization,
    kustomize_folders,
    load,
    name_of,
    pod_spec,
    render,
)

KUBERNETES_VERSION = "1.33"
BASE = collect(K8S / "base")
PRODUCTION = K8S / "overlays" / "production"
CONFIG = BASE["ConfigMap/parley"]["data"]
VARIABLES = set(all_variables())


def every_manifest() -> list[Path]:
    return sorted(
        path
        for path in K8S.rglob("*.yaml")
        if path.name != "kustomization.yaml" and "kind" in path.read_text()
    )


def validate_strictly(resource: dict[str, Any]) -> None:
    try:
        kv.validate(resource, KUBERNETES_VERSION, strict=True)
    except kv.SchemaNotFoundError:
        # Custom resources (KEDA) have no schema here; check what KEDA needs instead.
        assert resource["kind"] in ("ScaledObject", "TriggerAuthentication"), name_of(resource)


@pytest.mark.parametrize("path", every_manifest(), ids=lambda p: str(p.relative_to(K8S)))
def test_every_manifest_validates_strictly(path: Path) -> None:
    for resource in load(path):
        validate_strictly(resource)


def test_every_kustomization_lists_files_that_exist_and_patches_resources_it_has() -> None:
    folders = kustomize_folders()
    assert {K8S / "base", PRODUCTION, K8S / "components" / "keda"} <= set(folders)
    for folder in folders:
        spec = kustomization(folder)
        for entry in [*spec.get("resources", []), *spec.get("components", [])]:
            assert (folder / entry).exists(), f"{folder}: {entry}"
        resources = collect(folder)
        for patch in spec.get("patches", []):
            target = patch["target"]
            assert f"{target['kind']}/{target['name']}" in resources, (folder, target)
        for replica in spec.get("replicas", []):
            assert f"Deployment/{replica['name']}" in resources, (folder, replica)
        images = {c["image"].split(":")[0] for r in resources.values() for c in containers(r)}
        for image in spec.get("images", []):
            assert image["name"] in images, (folder, image)


def containers(resource: dict[str, Any]) -> list[dict[str, Any]]:
    if resource["kind"] not in WORKLOADS:
        return []
    spec = pod_spec(resource)
    return [*spec.get("initContainers", []), *spec["containers"]]


@pytest.mark.skipif(kubectl() is None, reason="kubectl (with kustomize built in) not installed")
def test_the_overlays_render_and_the_result_validates(tmp_path: Path) -> None:
    rendered = render(PRODUCTION)
    kinds = {name_of(r) for r in rendered}
    assert {
        "Namespace/parley",
        "Ingress/parley",
        "ScaledObject/parley-worker",
        "StatefulSet/redis",
        "Deployment/ollama",
        "Job/ollama-pull",
        "PodDisruptionBudget/parley-worker",
    } <= kinds
    for resource in rendered:
        validate_strictly(resource)
        if resource["kind"] != "Namespace":
            assert resource["metadata"]["namespace"] == "parley", name_of(resource)
    namespace = next(r for r in rendered if r["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    scaled = next(r for r in rendered if r["kind"] == "ScaledObject")
    assert scaled["spec"]["triggers"][0]["metadata"]["address"].startswith("redis.parley.svc")
    # The HPA fallback renders too, in place of KEDA.
    fallback = tmp_path / "hpa"
    fallback.mkdir()
    (fallback / "kustomization.yaml").write_text(
        "resources: [{}]\ncomponents: [{}]\n".format(
            os.path.relpath(K8S / "base", fallback),
            os.path.relpath(K8S / "components" / "hpa-cpu", fallback),
        )
    )
    with_hpa = {name_of(r): r for r in render(fallback)}
    assert "HorizontalPodAutoscaler/parley-worker" in with_hpa
    assert not any(name.startswith("ScaledObject/") for name in with_hpa)


def test_every_pod_meets_the_restricted_profile() -> None:
    resources = {**BASE, **collect(K8S / "components" / "keda")}
    workloads = [r for r in resources.values() if r["kind"] in WORKLOADS]
    assert {name_of(w) for w in workloads} >= {
        "Deployment/parley-gateway",
        "Deployment/parley-worker",
        "StatefulSet/redis",
        "Deployment/ollama",
        "Job/ollama-pull",
    }
    for workload in workloads:
        spec = pod_spec(workload)
        where = name_of(workload)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, where
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert spec["automountServiceAccountToken"] is False, where
        assert not spec.get("hostNetwork") and not spec.get("hostPID"), where
        mounted = {v["name"] for v in spec.get("volumes", [])}
        for container in containers(workload):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in context["capabilities"], where
            assert not context.get("privileged"), where
            resources = container["resources"]
            assert resources["requests"]["cpu"] and resources["requests"]["memory"], where
            assert resources["limits"]["memory"], where
            # A read-only root needs a writable /tmp.
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts and mounts["/tmp"] in mounted, where


def test_parley_pods_write_only_where_the_image_declares_volumes() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for name in ("Deployment/parley-gateway", "Deployment/parley-worker"):
        container = pod_spec(BASE[name])["containers"][0]
        mounts = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
        assert mounts == {"/tmp", "/home/parley"}, name
        assert 'VOLUME ["/tmp", "/home/parley"]' in dockerfile


def secret_templates() -> dict[str, dict[str, str]]:
    """The Secrets of secret.example.yaml: name → variables."""
    return {s["metadata"]["name"]: s["stringData"] for s in load(K8S / "secret.example.yaml")}


def test_config_map_and_secret_use_only_variables_parley_reads() -> None:
    assert set(CONFIG) <= VARIABLES
    keys = [key for data in secret_templates().values() for key in data]
    assert set(keys) <= VARIABLES
    assert len(keys) == len(set(keys))  # each in one Secret
    assert not set(CONFIG) & set(keys)  # nothing is set twice


def secret_variables() -> set[str]:
    """Every variable whose setting is a SecretStr: the credentials Parley reads."""
    found = set()
    for section in Settings.model_fields.values():
        section_type = section.annotation
        assert isinstance(section_type, type)
        for field in section_type.model_fields.values():  # type: ignore[attr-defined]
            if SecretStr in getattr(field.annotation, "__args__", (field.annotation,)):
                found.add(field.alias)
    return found


def test_every_secret_the_code_reads_is_in_the_secret_template() -> None:
    secrets = secret_variables()
    assert {"SLACK_APP_TOKEN", "SLACK_BOT_TOKEN", "TELEGRAM_BOT_TOKEN"} <= secrets
    template = {k: v for data in secret_templates().values() for k, v in data.items()}
    assert secrets <= set(template), secrets - set(template)
    assert all(value == "" for value in template.values())  # a template, never real values


def test_probes_and_ports_follow_the_configured_listeners() -> None:
    http_port = int(CONFIG["PARLEY_HTTP_PORT"])
    metrics_port = int(CONFIG["PARLEY_METRICS_PORT"])
    assert CONFIG["PARLEY_METRICS_HOST"] == "0.0.0.0"  # kubelet probes the pod IP
    for name in ("Deployment/parley-gateway", "Deployment/parley-worker"):
        container = pod_spec(BASE[name])["containers"][0]
        assert container["args"][0] in COMMANDS
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == metrics_port
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["port"] == "metrics", (name, probe)
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    gateway_ports = {
        p["name"]: p["containerPort"]
        for p in pod_spec(BASE["Deployment/parley-gateway"])["containers"][0]["ports"]
    }
    assert gateway_ports["http"] == http_port
    worker_ports = pod_spec(BASE["Deployment/parley-worker"])["containers"][0]["ports"]
    assert [p["name"] for p in worker_ports] == ["metrics"]  # workers take no webhooks
    public = BASE["Service/parley-gateway"]["spec"]["ports"]
    assert [p["targetPort"] for p in public] == ["http"]  # metrics never behind the Ingress


def test_the_ingress_routes_only_public_paths_to_the_gateway() -> None:
    """Which paths: tests/deploy/test_public_paths.py reads them against the gateway's."""
    ingress = load(PRODUCTION / "ingress.yaml")[0]
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    for path in paths:
        assert path["pathType"] in ("Exact", "Prefix") and path["path"] != "/"
        assert not path["path"].startswith(("/healthz", "/readyz", "/metrics"))
        assert path["backend"]["service"] == {"name": "parley-gateway", "port": {"name": "http"}}


def test_network_policies_fence_every_pod() -> None:
    policies = {
        r["metadata"]["name"]: r["spec"] for r in BASE.values() if r["kind"] == "NetworkPolicy"
    }
    assert {"parley-gateway", "parley-worker", "redis", "ollama", "ollama-pull"} <= set(policies)
    for spec in policies.values():
        assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    gateway = policies["parley-gateway"]
    assert {p["port"] for rule in gateway["ingress"] for p in rule["ports"]} == {
        int(CONFIG["PARLEY_HTTP_PORT"]),
        int(CONFIG["PARLEY_METRICS_PORT"]),
    }
    open_to_all = [rule for rule in gateway["ingress"] if "from" not in rule]
    assert [p["port"] for rule in open_to_all for p in rule["ports"]] == [
        int(CONFIG["PARLEY_HTTP_PORT"])
    ]

    def egress_ports(name: str) -> set[int]:
        return {p["port"] for rule in policies[name]["egress"] for p in rule["ports"]}

    assert egress_ports("parley-worker") == {53, 6379, 11434, 443}
    # "the internet" leaves out every private, link-local and shared (CGNAT) range: a
    # worker's fetch of a URL someone else named cannot reach the cluster's own addresses
    fenced = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"}
    blocks = [
        peer["ipBlock"]
        for spec in policies.values()
        for rule in spec["egress"]
        for peer in rule.get("to", [])
        if "ipBlock" in peer
    ]
    assert blocks and all(fenced <= set(b.get("except", [])) for b in blocks), blocks
    assert egress_ports("parley-gateway") == {53, 6379, 443}
    assert policies["redis"]["egress"] == []
    assert [p["port"] for p in policies["redis"]["ingress"][0]["ports"]] == [6379]


def test_disruption_budgets_cover_gateway_and_workers() -> None:
    budgets = [r for r in BASE.values() if r["kind"] == "PodDisruptionBudget"]
    covered = {tuple(sorted(b["spec"]["selector"]["matchLabels"].items())) for b in budgets}
    for name in ("Deployment/parley-gateway", "Deployment/parley-worker"):
        labels = BASE[name]["spec"]["selector"]["matchLabels"]
        assert tuple(sorted(labels.items())) in covered, name
    assert BASE["Deployment/parley-gateway"]["spec"]["replicas"] >= 2


def test_workers_scale_on_the_inbox_consumer_group_lag() -> None:
    keda = collect(K8S / "components" / "keda")["ScaledObject/parley-worker"]["spec"]
    assert keda["scaleTargetRef"]["name"] == "parley-worker"
    trigger = keda["triggers"][0]
    assert trigger["type"] == "redis-streams"
    prefix = all_variables()["PARLEY_REDIS_PREFIX"]
    assert trigger["metadata"]["stream"] == Keys(prefix).inbox
    assert trigger["metadata"]["consumerGroup"] == GROUP
    assert int(trigger["metadata"]["lagCount"]) > 0
    assert keda["minReplicaCount"] >= 2
    hpa = collect(K8S / "components" / "hpa-cpu")["HorizontalPodAutoscaler/parley-worker"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "parley-worker"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_workers_get_time_to_drain_before_they_are_killed() -> None:
    drain = float(CONFIG.get("PARLEY_DRAIN_TIMEOUT", all_variables()["PARLEY_DRAIN_TIMEOUT"]))
    stop = float(CONFIG.get("PARLEY_STOP_GRACE", all_variables()["PARLEY_STOP_GRACE"]))
    grace = pod_spec(BASE["Deployment/parley-worker"])["terminationGracePeriodSeconds"]
    assert grace > drain + stop  # a stuck stop ends itself, saying why, before the kill -9


def test_redis_runs_redis_8_with_the_projects_redis_conf_on_a_volume() -> None:
    redis = BASE["StatefulSet/redis"]
    container = pod_spec(redis)["containers"][0]
    assert container["image"].startswith("redis:8")
    assert "command" not in container  # the image's entrypoint loads the query engine
    conf = BASE["ConfigMap/redis-config"]["data"]["redis.conf"]
    assert conf.strip() == settings_lines(ROOT / "deploy" / "redis.conf")
    claim = redis["spec"]["volumeClaimTemplates"][0]
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    assert claim["metadata"]["name"] == "data"


def settings_lines(path: Path) -> str:
    lines = path.read_text().splitlines()
    return "\n".join(line for line in lines if line.strip() and not line.startswith("#"))


def test_the_model_pull_uses_the_workers_model() -> None:
    pull = pod_spec(BASE["Job/ollama-pull"])["containers"][0]
    env = {e["name"]: e.get("valueFrom", {}).get("configMapKeyRef") for e in pull["env"]}
    assert env["OLLAMA_MODEL"] == {"name": "parley", "key": "OLLAMA_MODEL"}
    assert "$(OLLAMA_MODEL)" in pull["command"]
    assert "OLLAMA_MODEL" in CONFIG


def test_the_gateway_mounts_the_triggers_file_from_its_own_secret() -> None:
    from bot.features.triggers import load_triggers

    example = load(K8S / "triggers-secret.example.yaml")[0]
    data = example["stringData"]
    pod = pod_spec(BASE["Deployment/parley-gateway"])
    container = pod["containers"][0]
    env = {e["name"]: e.get("valueFrom", {}) for e in container["env"]}
    ref = env["PARLEY_TRIGGERS_CONFIG"]["secretKeyRef"]
    assert ref == {
        "name": example["metadata"]["name"],
        "key": "PARLEY_TRIGGERS_CONFIG",
        "optional": True,  # no such Secret: no triggers
    }
    volume = next(v for v in pod["volumes"] if v.get("secret"))
    assert volume["secret"]["secretName"] == example["metadata"]["name"]
    assert volume["secret"]["optional"] is True
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    assert mount["readOnly"] is True
    (item,) = volume["secret"]["items"]
    assert data["PARLEY_TRIGGERS_CONFIG"] == f"{mount['mountPath']}/{item['path']}"
    # the example is a triggers file Parley reads, once its secrets are filled in
    import json
    import tempfile

    triggers = json.loads(data[item["key"]])
    assert all(spec["secret"] == "" for spec in triggers.values())  # a template
    for spec in triggers.values():
        spec["secret"] = "x" * 32
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "triggers.json"
        path.write_text(json.dumps(triggers))
        assert set(load_triggers(path)) == set(triggers)
    workers = pod_spec(BASE["Deployment/parley-worker"])["containers"][0]
    assert "PARLEY_TRIGGERS_CONFIG" not in {e["name"] for e in workers.get("env", [])}
