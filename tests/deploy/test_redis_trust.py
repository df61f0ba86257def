"""Redis is Parley's trust root (whoever writes to it can forge an approval): every
deployment makes it ask for a password that Parley reads from a Secret, only Parley's pods
and the autoscaler's scaler reach it, and the internet-facing gateway holds only the
secrets it uses."""

from __future__ import annotations

import re
from typing import Any

from tests.deploy.k8s import K8S, ROOT, collect, pod_spec
from tests.deploy.test_deploy_configs import documents
from tests.deploy.test_kubernetes import secret_templates, secret_variables

BASE = collect(K8S / "base")
KEDA = collect(K8S / "components" / "keda")
REDIS_SECRET = {"name": "parley-redis", "key": "REDIS_PASSWORD"}
# What `parley gateway` reads: the platforms' credentials (receiving, verifying, Socket Mode,
# webhook registration) and Redis's password. Never the model or transcription keys. A new
# secret setting goes to the gateway only if it needs it: add it here and to the Secret
# `parley`; else to `parley-worker` and blank it for the gateway in docker-compose.yml.
GATEWAY_USES = {
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "TELEGRAM_BOT_TOKEN",
    "PARLEY_TELEGRAM_WEBHOOK_SECRET",
    "PARLEY_SECRET_KEY",  # /oauth/callback stores a person's tokens encrypted
    "SLACK_CLIENT_SECRET",  # /slack/oauth_redirect exchanges an install's code
    "PARLEY_TRIGGERS_CONFIG",  # the triggers' file (its own Secret): /hooks verifies deliveries
    "REDIS_PASSWORD",
}


def container(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = pod_spec(BASE[name])["containers"][0]
    return spec


def env_from_secrets(spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in spec.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def secrets_of(spec: dict[str, Any]) -> set[str]:
    """Every secret variable a container receives, whole Secrets and single keys."""
    templates = secret_templates()
    whole = [s["secretRef"]["name"] for s in spec.get("envFrom", []) if "secretRef" in s]
    found = {key for name in whole for key in templates[name]}
    return found | set(env_from_secrets(spec))


def redis_conf() -> dict[str, str]:
    lines = (ROOT / "deploy" / "redis.conf").read_text().splitlines()
    return dict(line.split(None, 1) for line in lines if line.strip() and line[0] != "#")


def test_redis_config_keeps_protected_mode_and_no_password_in_plain_text() -> None:
    conf = redis_conf()
    assert conf["protected-mode"] == "yes"
    assert "requirepass" not in conf  # the password comes from a Secret, never a file in git
    assert "REDIS_PASSWORD" in secret_variables()  # Parley reads it, and redacts it


def test_kubernetes_redis_asks_for_the_password_from_its_secret() -> None:
    redis = container("StatefulSet/redis")
    args = redis["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    env = env_from_secrets(redis)
    assert env["REDIS_PASSWORD"] == REDIS_SECRET
    assert env["REDISCLI_AUTH"] == REDIS_SECRET  # the probes' redis-cli logs in
    for probe in ("readinessProbe", "livenessProbe"):
        assert redis[probe]["exec"]["command"][0] == "redis-cli"
    assert secret_templates()["parley-redis"] == {"REDIS_PASSWORD": ""}


def test_everything_that_reaches_redis_in_kubernetes_has_the_password() -> None:
    config = BASE["ConfigMap/parley"]["data"]
    assert "@" not in config["REDIS_URL"]  # no password in a ConfigMap
    for name in ("Deployment/parley-gateway", "Deployment/parley-worker"):
        assert env_from_secrets(container(name))["REDIS_PASSWORD"] == REDIS_SECRET, name
    trigger = KEDA["ScaledObject/parley-worker"]["spec"]["triggers"][0]
    auth = KEDA[f"TriggerAuthentication/{trigger['authenticationRef']['name']}"]["spec"]
    assert auth["secretTargetRef"] == [{"parameter": "password", **REDIS_SECRET}]


def test_only_parley_and_the_scaler_reach_redis() -> None:
    policies = [
        r["spec"]
        for r in {**BASE, **KEDA}.values()
        if r["kind"] == "NetworkPolicy"
        and r["spec"]["podSelector"]["matchLabels"] == {"app": "redis"}
    ]
    assert len(policies) == 2
    peers = [peer for p in policies for rule in p["ingress"] for peer in rule["from"]]
    admitted = []
    for peer in peers:
        # a namespace alone would admit every pod in it
        assert "podSelector" in peer, peer
        selector = peer["podSelector"]
        namespace = peer.get("namespaceSelector", {}).get("matchLabels", {})
        admitted.append((namespace.get("kubernetes.io/metadata.name"), selector))
    parley = {
        "matchLabels": {"app": "parley"},
        "matchExpressions": [{"key": "role", "operator": "In", "values": ["gateway", "worker"]}],
    }
    assert admitted == [(None, parley), ("keda", {"matchLabels": {"app": "keda-operator"}})]
    for name in ("Deployment/parley-gateway", "Deployment/parley-worker"):
        labels = BASE[name]["spec"]["template"]["metadata"]["labels"]
        assert labels["app"] == "parley" and labels["role"] in ("gateway", "worker")


def test_the_gateway_gets_only_the_secrets_it_uses() -> None:
    assert secrets_of(container("Deployment/parley-gateway")) <= GATEWAY_USES
    assert secrets_of(container("Deployment/parley-worker")) == secret_variables()
    assert "ANTHROPIC_API_KEY" in secret_templates()["parley-worker"]


def test_compose_redis_asks_for_the_password_everyone_reads() -> None:
    services = documents("docker-compose.yml")[0]["services"]
    redis = services["redis"]
    command = " ".join(redis["command"])
    assert (
        redis["command"][:2] == ["sh", "-c"] and "exec docker-entrypoint.sh redis-server" in command
    )
    # `$$`: the container's shell expands it from ../.env, and refuses to start without it
    assert re.search(r'--requirepass "\$\$\{REDIS_PASSWORD:\?[^}]+\}"', command)
    assert redis["env_file"] == "../.env"
    health = " ".join(redis["healthcheck"]["test"])
    assert 'REDISCLI_AUTH="$$REDIS_PASSWORD"' in health and "PONG" in health
    for name in ("gateway", "worker"):
        assert services[name]["env_file"] == "../.env"  # REDIS_PASSWORD with the rest
        assert "@" not in services[name]["environment"]["REDIS_URL"]


def test_compose_gives_the_gateway_only_the_secrets_it_uses() -> None:
    services = documents("docker-compose.yml")[0]["services"]
    blanked = {k for k, v in services["gateway"]["environment"].items() if v == ""}
    assert blanked == secret_variables() - GATEWAY_USES
    assert not {k for k, v in services["worker"]["environment"].items() if v == ""}
