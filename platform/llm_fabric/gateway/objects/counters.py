"""The gateway's counter store at a gateway site: a small Redis StatefulSet (fabric.yaml `gateway.counters: {}`).

One Redis pod (the counts are small: a few keys a tenant and deployment) with its append-only file on
a claim, so that a restart keeps each tenant's month-to-date; a Service the gateway's settings name
(`redis://fabric-gateway-counters.NAMESPACE.svc.cluster.local:6379/0`); a NetworkPolicy that lets only
the gateway's pods in, and one that lets the gateway's pods out to it (egress policies add up, so the
gateway's own egress policy stays as it is). Nothing is rendered where the operator gives a URL
(`gateway.counters.url`) or the gateway has no counters.
"""

from __future__ import annotations

from llm_fabric.gateway.budgets import COUNTERS_NAME, COUNTERS_PORT
from llm_fabric.gateway.objects.gateway import GATEWAY_LABELS
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest, claim_spec, network_policy
from llm_fabric.site.models import GatewayCounters
from llm_fabric.trust.sites import TrustedSite

COUNTERS_LABELS = {"app.kubernetes.io/name": "redis", "app.kubernetes.io/component": "gateway-counters"}
DATA_DIR = "/data"


def build_counter_bundles(site: TrustedSite, site_id: str, namespace: str) -> list[Bundle]:
    """The Redis of the gateway at `site_id`, where this site runs a gateway that counts in a rendered store."""
    gw = site.config.gateway
    if gw is None or gw.counters is None or gw.counters.url is not None or site_id not in site.config.gateway_sites():
        return []
    labels = L.common_labels("gateway-counters", COUNTERS_NAME) | COUNTERS_LABELS
    objects = [
        _statefulset(namespace, gw.counters, labels),
        _service(namespace, labels),
        _ingress(namespace, labels),
        _gateway_egress(namespace, labels),
    ]
    return [Bundle("gateway-counters", COUNTERS_NAME, objects)]


def _statefulset(namespace: str, counters: GatewayCounters, labels: dict[str, str]) -> Manifest:
    probe = {"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 10, "timeoutSeconds": 2}
    container = {
        "name": "redis",
        "image": counters.image,
        # the append-only file, fsynced every second: a restart loses at most a second of counts
        "args": ["--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--dir", DATA_DIR],
        "ports": [{"name": "redis", "containerPort": COUNTERS_PORT, "protocol": "TCP"}],
        "readinessProbe": probe,
        "livenessProbe": {**probe, "initialDelaySeconds": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "volumeMounts": [{"name": "data", "mountPath": DATA_DIR}],
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 999},
    }
    claim = claim_spec("ReadWriteOnce", counters.storage, counters.storage_class)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": COUNTERS_NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "serviceName": COUNTERS_NAME,
            "selector": {"matchLabels": COUNTERS_LABELS},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "securityContext": {"fsGroup": 999}},
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": claim}],
        },
    }


def _service(namespace: str, labels: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": COUNTERS_NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": COUNTERS_LABELS,
            "ports": [{"name": "redis", "port": COUNTERS_PORT, "targetPort": "redis", "protocol": "TCP"}],
        },
    }


def _ingress(namespace: str, labels: dict[str, str]) -> Manifest:
    """Only the gateway's pods reach the store: the counts decide who is admitted."""
    gateway = {"podSelector": {"matchLabels": GATEWAY_LABELS}}
    rule = {"from": [gateway], "ports": [{"protocol": "TCP", "port": COUNTERS_PORT}]}
    return network_policy(f"{COUNTERS_NAME}-ingress", namespace, labels, COUNTERS_LABELS, "Ingress", [rule])


def _gateway_egress(namespace: str, labels: dict[str, str]) -> Manifest:
    store = {"podSelector": {"matchLabels": COUNTERS_LABELS}}
    rule = {"to": [store], "ports": [{"protocol": "TCP", "port": COUNTERS_PORT}]}
    return network_policy(f"{COUNTERS_NAME}-egress", namespace, labels, GATEWAY_LABELS, "Egress", [rule])
