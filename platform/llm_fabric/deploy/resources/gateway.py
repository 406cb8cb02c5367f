"""The tenant gateway in the serving stack of the site that runs it (fabric.yaml `gateway.site`).

A Deployment of the LiteLLM image with llm-fabric's hooks (engine/images/gateway.Dockerfile), its
Service, a PersistentVolumeClaim for the meter's day files of request records (collected with
`kubectl cp`, then `fabric ledger ingest`: docs/gateway.md), a ConfigMap with the generated config
and hook settings (no key hashes: those come from the Secret `fabric-gateway-keys`, made from
`fabric gateway config`'s tenant-keys.json), an egress NetworkPolicy (DNS, the engines of this
namespace, the site's allowed CIDRs: external providers and other sites), a PodMonitor and alert
rules (429 rate, gateway errors). With `routing: inference-extension`, a GIE InferencePool per
deployment (the endpoint picker scores prefix cache, queue and KV use) and an HTTPRoute from the
inference Gateway to it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from llm_fabric.deploy import labels as L
from llm_fabric.deploy.manifests import Bundle, Manifest
from llm_fabric.deploy.options import ENGINE_PORT
from llm_fabric.gateway.config import GatewayFiles, build_gateway, gateway_texts
from llm_fabric.gateway.settings import KEYS_ENV, KEYS_FILE, RECORDS_ENV, SETTINGS_ENV, SETTINGS_FILE, WRITER_ENV
from llm_fabric.plan.document import Plan
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import GatewayConfig

NAME = "fabric-gateway"
PORT = 4000
KEYS_SECRET = "fabric-gateway-keys"
MASTER_KEY_SECRET = "fabric-gateway-master-key"
EXTERNAL_SECRET = "fabric-gateway-external"
CONFIG_DIR = "/etc/fabric-gateway"
KEYS_DIR = "/etc/fabric-gateway-keys"
RECORDS_DIR = "/var/lib/fabric-gateway"
RECORDS_CLAIM = "fabric-gateway-records"
GATEWAY_LABELS = {"app.kubernetes.io/name": "litellm", "app.kubernetes.io/component": "gateway"}
ENGINE_SELECTOR = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/component": "engine"}
INFERENCE_GATEWAY = "llm-fabric-inference"
EPP_PORT = 9002


def build_gateway_bundles(site: SiteRepo, plan: Plan, site_id: str, namespace: str) -> list[Bundle]:
    """The gateway's objects, when this site runs it; none otherwise."""
    gw = site.config.gateway
    if gw is None or (gw.site or next(iter(site.config.sites))) != site_id:
        return []
    files = build_gateway(site, plan, site_id=site_id)
    bundles = [Bundle("gateway", NAME, _gateway_objects(site, site_id, namespace, gw, files))]
    if gw.routing == "inference-extension":
        for deployment in sorted({r.deployment for r in plan.replicas if r.site == site_id}):
            bundles.append(Bundle("inference-pool", deployment, _inference_objects(deployment, namespace)))
    return bundles


def _gateway_objects(
    site: SiteRepo, site_id: str, namespace: str, gw: GatewayConfig, files: GatewayFiles
) -> list[Manifest]:
    labels = L.common_labels("gateway", NAME) | GATEWAY_LABELS
    texts = gateway_texts(files, with_keys=False)
    digest = hashlib.sha256("".join(texts.values()).encode()).hexdigest()[:16]
    config_map: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "data": texts,
    }
    return [
        config_map,
        _records_claim(namespace, gw, labels),
        _deployment(namespace, gw, labels, digest),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": GATEWAY_LABELS,
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
            },
        },
        _egress(site, site_id, namespace, labels),
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PodMonitor",
            "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {"matchLabels": GATEWAY_LABELS},
                "podMetricsEndpoints": [{"port": "http", "path": "/metrics/", "interval": "30s"}],
            },
        },
        _alerts(namespace, labels),
    ]


def _deployment(namespace: str, gw: GatewayConfig, labels: dict[str, str], digest: str) -> Manifest:
    env: list[dict[str, Any]] = [
        {"name": "LITELLM_LOCAL_MODEL_COST_MAP", "value": "True"},  # never fetch the cost map at start-up
        {"name": "LITELLM_MASTER_KEY", "valueFrom": {"secretKeyRef": {"name": MASTER_KEY_SECRET, "key": "key"}}},
        {"name": SETTINGS_ENV, "value": f"{CONFIG_DIR}/{SETTINGS_FILE}"},
        {"name": KEYS_ENV, "value": f"{KEYS_DIR}/{KEYS_FILE}"},
        {"name": RECORDS_ENV, "value": RECORDS_DIR},
        # each pod writes its own day files: two pods on one ReadWriteMany claim never append to one file
        {"name": WRITER_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    for provider in sorted(gw.external.values(), key=lambda p: p.api_key_env or ""):
        if provider.api_key_env:
            env.append(
                {
                    "name": provider.api_key_env,
                    "valueFrom": {
                        "secretKeyRef": {"name": EXTERNAL_SECRET, "key": provider.api_key_env, "optional": True}
                    },
                }
            )
    probe = {"httpGet": {"path": "/health/liveliness", "port": "http"}, "periodSeconds": 10}
    container = {
        "name": "litellm",
        "image": gw.image,
        "args": ["--config", f"{CONFIG_DIR}/litellm-config.yaml", "--port", str(PORT), "--num_workers", "1"],
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "env": env,
        "readinessProbe": {**probe, "httpGet": {"path": "/health/readiness", "port": "http"}},
        "livenessProbe": probe,
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "keys", "mountPath": KEYS_DIR, "readOnly": True},
            {"name": "records", "mountPath": RECORDS_DIR},
        ],
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": gw.replicas,
            # a ReadWriteOnce claim cannot follow a rolling update's new pod to another node
            "strategy": {"type": "Recreate" if gw.replicas == 1 else "RollingUpdate"},
            "selector": {"matchLabels": GATEWAY_LABELS},
            "template": {
                # a new config rolls the pods: the proxy reads its files at start-up only
                "metadata": {"labels": labels, "annotations": {"llm-fabric.io/config-sha256": digest}},
                "spec": {
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": NAME}},
                        {"name": "keys", "secret": {"secretName": KEYS_SECRET}},
                        {"name": "records", "persistentVolumeClaim": {"claimName": RECORDS_CLAIM}},
                    ],
                },
            },
        },
    }


def _records_claim(namespace: str, gw: GatewayConfig, labels: dict[str, str]) -> Manifest:
    """The meter's folder, kept across restarts and rollouts until its closed days are collected."""
    spec: dict[str, Any] = {
        # one pod (Recreate): ReadWriteOnce; several pods on several nodes need a ReadWriteMany class
        "accessModes": ["ReadWriteOnce" if gw.replicas == 1 else "ReadWriteMany"],
        "resources": {"requests": {"storage": gw.records_storage}},
    }
    if gw.records_storage_class:
        spec["storageClassName"] = gw.records_storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": RECORDS_CLAIM, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _egress(site: SiteRepo, site_id: str, namespace: str, labels: dict[str, str]) -> Manifest:
    dns_peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    egress: list[dict[str, Any]] = [
        {"to": [dns_peer], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {
            "to": [{"podSelector": {"matchLabels": ENGINE_SELECTOR}}],
            "ports": [{"protocol": "TCP", "port": ENGINE_PORT}],
        },
    ]
    allowed = site.config.sites[site_id].egress_allowed  # other sites' gateways and external providers
    if allowed:
        egress.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in allowed]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{NAME}-egress", "namespace": namespace, "labels": labels},
        "spec": {"podSelector": {"matchLabels": GATEWAY_LABELS}, "policyTypes": ["Egress"], "egress": egress},
    }


def _alerts(namespace: str, labels: dict[str, str]) -> Manifest:
    total = "sum(rate(litellm_proxy_total_requests_metric[5m]))"
    rules = [
        {
            "alert": "FabricGatewayThrottling",
            "expr": f'sum(rate(litellm_proxy_failed_requests_metric{{exception_status="429"}}[5m])) / {total} > 0.1',
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "more than 10 % of the gateway's requests are refused with 429: "
                "tenants at their limits or deployments full (plan more capacity?)"
            },
        },
        {
            "alert": "FabricGatewayErrors",
            "expr": f'sum(rate(litellm_proxy_failed_requests_metric{{exception_status=~"5.."}}[5m])) / {total} > 0.05',
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "more than 5 % of the gateway's requests fail with a 5xx"},
        },
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {"groups": [{"name": "llm-fabric.gateway", "rules": rules}]},
    }


def _inference_objects(deployment: str, namespace: str) -> list[Manifest]:
    """A GIE InferencePool over the deployment's engines here, and the HTTPRoute that sends its model to it."""
    labels = L.common_labels("inference-pool", deployment)
    pool = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": deployment, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": ENGINE_SELECTOR | {L.DEPLOYMENT: deployment}},
            "targetPorts": [{"number": ENGINE_PORT}],
            # the endpoint picker (the upstream EPP chart, configured with the prefix-cache, queue and
            # KV-cache-utilisation scorers) runs as the Service `<deployment>-epp`
            "endpointPickerRef": {
                "name": f"{deployment}-epp",
                "port": {"number": EPP_PORT},
                "failureMode": "FailClose",
            },
        },
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": deployment, "namespace": namespace, "labels": labels},
        "spec": {
            "parentRefs": [{"name": INFERENCE_GATEWAY}],
            "rules": [
                {
                    # body-based routing puts the request's model in this header
                    "matches": [
                        {
                            "path": {"type": "PathPrefix", "value": "/v1"},
                            "headers": [{"name": "X-Gateway-Model-Name", "value": deployment}],
                        }
                    ],
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": deployment}
                    ],
                }
            ],
        },
    }
    return [pool, route]
