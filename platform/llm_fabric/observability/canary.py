"""The canary prober of a site, in its serving stack: the same code as `fabric canary --serve`.

A Deployment of the fabric image (engine/images/fabric.Dockerfile) running `fabric canary --serve`
over the site's replicas, each reached directly through a Service of its own (`REPLICA-direct`,
never the deployment's Service, which balances), with the plan and the site repo's recorded
references in a ConfigMap; its Service (`fabric-canary:9400`: the verdicts, `/rotation` for the
gateway, `/metrics`), a PodMonitor that keeps the series' own labels (site, deployment, replica,
node), and the canary's alert rules (`rule_groups`).

Its writes (drain notices) take the write token of the Secret `fabric-canary-token`, which the operator
makes (docs/canary.md: it is never rendered with a value), and an ingress NetworkPolicy admits only the
site's gateway pods (`/rotation`), the engine pods (the readiness probe's verdict, the preStop's notice)
and the site's Prometheus (`/metrics`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from llm_fabric import __version__
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest, network_policy, prometheus_peer
from llm_fabric.names import (
    CANARY_HELD_METRIC,
    CANARY_LATENCY_METRIC,
    CANARY_PASS_METRIC,
    CANARY_PORT,
    CANARY_PROBER_LABELS,
    CANARY_REFERENCE_METRIC,
    CANARY_ROTATION,
    CANARY_SERVICE,
    CANARY_SIBLINGS_METRIC,
    CANARY_TOKEN_FILE,
    canary_replica_path,
)
from llm_fabric.observability.rules import alert_rule
from llm_fabric.plan.document import Plan, plan_json
from llm_fabric.serving.probes import canary_token_mount, canary_token_volume
from llm_fabric.serving.workloads import ENGINE_LABELS, replica_name
from llm_fabric.trust.sites import TrustedSite

NAME = CANARY_SERVICE
PORT = CANARY_PORT
EVERY_S = 60
TIMEOUT_S = 30
# llm-fabric with its dependencies (the engine and gateway images carry it without them)
IMAGE = f"llm-fabric/fabric:{__version__}"
CONFIG_DIR = "/etc/fabric-canary"
PROBER_LABELS = CANARY_PROBER_LABELS
# alert thresholds: a canary answer is a few dozen tokens, seconds even behind a long prefill
LATENCY_THRESHOLD_S = 10


def direct_service_name(deployment: str, index: int) -> str:
    return L.dns_name(deployment, str(index), "direct")


def rule_groups() -> list[dict[str, Any]]:
    """The canary's alert rules (a group of their own beside observability's)."""
    on_replica = "{{ $labels.deployment }}/{{ $labels.replica }} on {{ $labels.node }}"
    rules = [
        alert_rule(
            "FabricCanaryReplicaDisagrees",
            # a replica the recorded reference bears out is not the odd one out
            f"{CANARY_SIBLINGS_METRIC} == 0 unless on (site, deployment, replica, node) {CANARY_REFERENCE_METRIC} == 1",
            "5m",
            "critical",
            f"replica {on_replica} answers the canary unlike the other replicas of its deployment",
            "the gateway keeps it out while it fails; compare its configuration: "
            "fabric check live -C SITE --plan plan.json --endpoint {{ $labels.deployment }}/{{ $labels.replica }}=URL",
        ),
        alert_rule(
            "FabricCanaryDeploymentChanged",
            f"max by (site, deployment) ({CANARY_REFERENCE_METRIC}) == 0",
            "10m",
            "critical",
            "every replica of {{ $labels.deployment }} at {{ $labels.site }} disagrees with its canary reference",
            "the model or the engine changed: roll back, or if the change was deliberate record the new answers "
            "(fabric canary --record --branch canary/{{ $labels.deployment }}) and merge them after review",
        ),
        alert_rule(
            "FabricCanaryFailing",
            f"{CANARY_PASS_METRIC} == 0",
            "5m",
            "warning",
            f"replica {on_replica} fails its canary prompts and is out of the gateway's rotation",
            f"GET http://{NAME}:{PORT}{canary_replica_path('{{ $labels.deployment }}', '{{ $labels.replica }}')} "
            "names the prompt",
        ),
        alert_rule(
            "FabricCanaryHeldInRotation",
            # live/prober.canary_holds: a canary that fails every replica cannot take the deployment out
            f"max by (site, deployment) ({CANARY_HELD_METRIC}) == 1",
            "5m",
            "critical",
            "every replica of {{ $labels.deployment }} at {{ $labels.site }} fails its canary, and no reference "
            "recorded for its configuration bears it out: the replicas are kept in rotation",
            f"GET http://{NAME}:{PORT}/{CANARY_ROTATION} says why; a reference of an older configuration (one "
            "recorded without a fingerprint) is re-recorded with fabric canary --record after review",
        ),
        alert_rule(
            "FabricCanarySlow",
            f"max by (site, deployment, replica, node) ({CANARY_LATENCY_METRIC}) > {LATENCY_THRESHOLD_S}",
            "15m",
            "warning",
            f"replica {on_replica} took {{{{ $value }}}} s for a canary answer of a few tokens",
            "the engine is overloaded or stalling: look at its queue (fabric:requests_waiting:sum) and its log",
        ),
    ]
    return [{"name": "llm-fabric.canary", "rules": rules}]


def _references(site: TrustedSite) -> dict[str, str]:
    folder = Path(site.root) / "canary"
    return {f"reference-{p.stem}.yaml": p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.yaml"))}


def site_plan(plan: Plan, site_id: str) -> Plan:
    """The plan cut to what the site's prober asks: its replicas, their deployments and its nodes (a site's
    objects name no node of another site)."""
    replicas = [r for r in plan.replicas if r.site == site_id]
    deployments = {r.deployment for r in replicas}
    return plan.model_copy(
        update={
            "replicas": replicas,
            "deployments": {k: v for k, v in plan.deployments.items() if k in deployments},
            "nodes": [n for n in plan.nodes if n.site == site_id],
            "sites": {k: v for k, v in plan.sites.items() if k == site_id},
            "owners": {},
            "reclaim_order": [],
            "diff": None,
            "rollout": None,  # the prober asks no surge (and another site's surge names that site's nodes)
            # the solver's time differs from one plan to the next: a render must be the same bytes each time
            "solver": plan.solver.model_copy(update={"wall_seconds": 0.0}),
        }
    )


def build_canary(site: TrustedSite, plan: Plan, site_id: str, namespace: str) -> list[Bundle]:
    replicas = sorted((r for r in plan.replicas if r.site == site_id), key=lambda r: (r.deployment, r.index))
    if not replicas:
        return []
    labels = L.common_labels("canary", NAME) | PROBER_LABELS
    references = {
        k: v
        for k, v in _references(site).items()
        if k.removeprefix("reference-").removesuffix(".yaml") in {r.deployment for r in replicas}
    }
    data = {"plan.json": plan_json(site_plan(plan, site_id))} | references
    config: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "data": data,
    }
    items = [{"key": "plan.json", "path": "plan.json"}] + [
        {"key": key, "path": f"references/{key.removeprefix('reference-')}"} for key in references
    ]
    args = ["canary", "--plan", f"{CONFIG_DIR}/plan.json", "--references", f"{CONFIG_DIR}/references"]
    for r in replicas:
        url = f"http://{direct_service_name(r.deployment, r.index)}.{namespace}.svc.cluster.local:80"
        args += ["--endpoint", f"{r.deployment}/{r.index}={url}"]
    args += ["--timeout", str(TIMEOUT_S), "--serve", f"0.0.0.0:{PORT}", "--every", str(EVERY_S)]
    args += ["--write-token-file", CANARY_TOKEN_FILE]
    if (prometheus := site.config.sites[site_id].cluster.prometheus_url) is not None:
        args += ["--prometheus", prometheus]  # node-fatal Xid alerts and cordoned nodes take replicas out too
    # a new plan or reference restarts the prober (the ConfigMap is read at start)
    digest = hashlib.sha256("".join(f"{k}\n{v}" for k, v in sorted(data.items())).encode()).hexdigest()[:16]
    probe = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10}
    deployment: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(PROBER_LABELS)},
            "template": {
                "metadata": {"labels": labels, "annotations": {"fabric.llm/canary-config": digest}},
                "spec": {
                    "containers": [
                        {
                            "name": "prober",
                            "image": IMAGE,
                            "args": args,
                            "ports": [{"name": "http", "containerPort": PORT}],
                            "readinessProbe": probe,
                            "livenessProbe": probe,
                            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                            "volumeMounts": [
                                {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                                canary_token_mount(),
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "config", "configMap": {"name": NAME, "items": items}},
                        # optional: without the Secret the prober serves its verdicts and refuses every write
                        canary_token_volume(optional=True),
                    ],
                },
            },
        },
    }
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {"selector": dict(PROBER_LABELS), "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]},
    }
    monitor: Manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": dict(PROBER_LABELS)},
            # the series carry the replica's labels themselves, not the prober pod's
            "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "60s", "honorLabels": True}],
        },
    }
    rules: Manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {"groups": rule_groups()},
    }
    direct = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": direct_service_name(r.deployment, r.index),
                "namespace": namespace,
                "labels": L.common_labels("canary", replica_name(r)) | {L.DEPLOYMENT: r.deployment},
            },
            "spec": {
                "selector": ENGINE_LABELS | {L.REPLICA: replica_name(r), L.DEPLOYMENT: r.deployment},
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
            },
        }
        for r in replicas
    ]
    ingress = _ingress(namespace, labels, site.config.sites[site_id].cluster.prometheus_namespace)
    return [Bundle("canary", NAME, [config, *direct, deployment, service, monitor, rules, ingress])]


def _ingress(namespace: str, labels: dict[str, str], prometheus_namespace: str) -> Manifest:
    """Who reaches the prober: the gateway (its rotation), the engines (their readiness probe reads the
    verdict, their preStop sends the drain notice) and Prometheus (the metrics); nobody else."""
    peers = [
        {"podSelector": {"matchLabels": dict(L.GATEWAY_LABELS)}},
        {"podSelector": {"matchLabels": dict(ENGINE_LABELS)}},
        prometheus_peer(prometheus_namespace),
    ]
    rule = {"from": peers, "ports": [{"protocol": "TCP", "port": PORT}]}
    return network_policy(f"{NAME}-ingress", namespace, labels, PROBER_LABELS, "Ingress", [rule])
