"""The tenant gateway in the serving stack of every site that runs one (fabric.yaml `gateway.sites`, default all).

A Deployment of the LiteLLM image with llm-fabric's hooks (engine/images/gateway.Dockerfile), its Service, a
PersistentVolumeClaim for the meter's day files of request records (collected with `kubectl cp`, then
`fabric ledger ingest`: docs/gateway.md), a ConfigMap with the generated config and hook settings (no key
hashes: those come from the Secret `fabric-gateway-keys`, made from `fabric gateway config`'s
tenant-keys.json), an egress NetworkPolicy (DNS, the engines of this namespace, the site's allowed CIDRs: external
providers and other sites), a PodMonitor and alert rules (429 rate, gateway errors). Each site's gateway
relays to another site's gateway with the federation's peer key (the Secret `fabric-gateway-peer-key`, the
same value at every site: a bearer that grants nothing alone) and an assertion signed with its own site's
relay key (the Secret `fabric-gateway-relay-key`, key `relay.pem`, made by the operator in that site's
cluster only, rendered only where the site repo has keys/gateway-relay/SITE.pub); the serving site believes
it by the ConfigMap `fabric-gateway-relay-peers` (every gateway site's public key, from keys/gateway-relay/).
The gateway's entries reach each replica through its direct Service (the canary's); during a rollout it
renders one per surge replica (`DEPLOYMENT-surge-INDEX-direct`). With `routing: inference-extension`, per
deployment a GIE InferencePool, its endpoint picker (Deployment, Service, ConfigMap with the scorers:
prefix cache, queue, KV use; ServiceAccount and Role to watch pods and pools) and an HTTPRoute from the
inference Gateway to the pool; the gateway's entries for its own site then go to that Gateway.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from llm_fabric.engine.command import ENGINE_PORT
from llm_fabric.gateway.config import GatewayFiles, build_gateway, gateway_texts
from llm_fabric.gateway.endpoints import surge_direct_service_name
from llm_fabric.gateway.objects.inference_objectives import inference_objectives
from llm_fabric.gateway.relay_keys import peers_document, read_relay_keys
from llm_fabric.gateway.runtime.frontdoor import PEER_KEY_ENV
from llm_fabric.gateway.runtime.inference import MODEL_HEADER
from llm_fabric.gateway.runtime.relay import RELAY_KEY_ENV, RELAY_PEERS_ENV
from llm_fabric.gateway.runtime.settings import (
    KEYS_ENV,
    KEYS_FILE,
    RECORDS_ENV,
    SETTINGS_ENV,
    SETTINGS_FILE,
    WRITER_ENV,
)
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest, claim_spec, network_policy
from llm_fabric.names import CANARY_PORT as PROBER_PORT
from llm_fabric.names import CANARY_PROBER_LABELS as PROBER_LABELS
from llm_fabric.names import CANARY_URL_ENV
from llm_fabric.names import canary_url as prober_url
from llm_fabric.plan.document import Plan
from llm_fabric.serving.workloads import ENGINE_LABELS, site_surges, surge_name
from llm_fabric.site.models import GatewayConfig
from llm_fabric.trust.sites import TrustedSite

NAME = "fabric-gateway"
PORT = 4000
KEYS_SECRET = "fabric-gateway-keys"
MASTER_KEY_SECRET = "fabric-gateway-master-key"
EXTERNAL_SECRET = "fabric-gateway-external"
PEER_KEY_SECRET = "fabric-gateway-peer-key"
RELAY_KEY_SECRET = "fabric-gateway-relay-key"  # this site's Ed25519 private key, in this site's cluster only
RELAY_KEY_FILE = "relay.pem"
RELAY_PEERS = "fabric-gateway-relay-peers"  # every gateway site's public relay key (keys/gateway-relay/)
RELAY_PEERS_FILE = "relay-peers.json"
RELAY_KEY_DIR = "/etc/fabric-gateway-relay-key"
RELAY_PEERS_DIR = "/etc/fabric-gateway-relay-peers"
CONFIG_DIR = "/etc/fabric-gateway"
KEYS_DIR = "/etc/fabric-gateway-keys"
RECORDS_DIR = "/var/lib/fabric-gateway"
RECORDS_CLAIM = "fabric-gateway-records"
GATEWAY_LABELS = L.GATEWAY_LABELS
# Gateway implementations label their proxy pods with their Gateway's name (Gateway API GEP-1762)
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
INFERENCE_GATEWAY = "llm-fabric-inference"
# the Gateway API Inference Extension's endpoint picker, pinned: v1.5.0 is the last release that ships it
# (later ones moved it to llm-d/llm-d-router); its InferencePool v1 is the one in ../shared/crds
EPP_VERSION = "v1.5.0"
EPP_IMAGE = f"registry.k8s.io/gateway-api-inference-extension/epp:{EPP_VERSION}"
EPP_PORT = 9002  # ext-proc (gRPC), what the inference Gateway calls
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
EPP_CONFIG_FILE = "epp-config.yaml"


def build_gateway_bundles(site: TrustedSite, plan: Plan, site_id: str, namespace: str) -> list[Bundle]:
    """The gateway's objects, when this site runs one; none otherwise."""
    gw = site.config.gateway
    if gw is None or site_id not in site.config.gateway_sites():
        return []
    files = build_gateway(site, plan, site_id=site_id)
    objects = _gateway_objects(site, site_id, namespace, gw, files)
    if gw.routing != "inference-extension":
        objects += _surge_services(plan, site_id, namespace)
    bundles = [Bundle("gateway", NAME, objects)]
    if gw.routing == "inference-extension":
        for deployment in sorted({r.deployment for r in plan.replicas if r.site == site_id}):
            objects = _inference_objects(deployment, namespace)
            if (dep := files.settings.deployments.get(deployment)) is not None:
                objects += inference_objectives(deployment, namespace, dep)
            bundles.append(Bundle("inference-pool", deployment, objects))
    return bundles


def _gateway_objects(
    site: TrustedSite, site_id: str, namespace: str, gw: GatewayConfig, files: GatewayFiles
) -> list[Manifest]:
    labels = L.common_labels("gateway", NAME) | GATEWAY_LABELS
    texts = gateway_texts(files, with_keys=False)
    relay_keys = read_relay_keys(site)[0]  # the site checks refuse a repo with a bad one
    peers = peers_document(relay_keys)
    # a new public relay key rolls the pods too: the hooks read the peers at start-up
    digest = hashlib.sha256("".join([*texts.values(), peers]).encode()).hexdigest()[:16]
    config_map: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "data": texts,
    }
    relay_peers: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": RELAY_PEERS, "namespace": namespace, "labels": labels},
        "data": {RELAY_PEERS_FILE: peers},
    }
    return [
        config_map,
        relay_peers,
        _records_claim(namespace, gw, labels),
        _deployment(namespace, gw, labels, digest, signs_relays=site_id in relay_keys),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": GATEWAY_LABELS,
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
            },
        },
        _egress(site, site_id, namespace, labels, gw),
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


def _deployment(
    namespace: str, gw: GatewayConfig, labels: dict[str, str], digest: str, *, signs_relays: bool
) -> Manifest:
    env: list[dict[str, Any]] = [
        {"name": "LITELLM_LOCAL_MODEL_COST_MAP", "value": "True"},  # never fetch the cost map at start-up
        {"name": "LITELLM_MASTER_KEY", "valueFrom": {"secretKeyRef": {"name": MASTER_KEY_SECRET, "key": "key"}}},
        {"name": SETTINGS_ENV, "value": f"{CONFIG_DIR}/{SETTINGS_FILE}"},
        {"name": KEYS_ENV, "value": f"{KEYS_DIR}/{KEYS_FILE}"},
        {"name": RECORDS_ENV, "value": RECORDS_DIR},
        # each pod writes its own day files: two pods on one ReadWriteMany claim never append to one file
        {"name": WRITER_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # the same value at every site: what a relay to another site's gateway carries, and what one from it must
        {
            "name": PEER_KEY_ENV,
            "valueFrom": {"secretKeyRef": {"name": PEER_KEY_SECRET, "key": "key", "optional": True}},
        },
        {"name": CANARY_URL_ENV, "value": prober_url(namespace)},  # the canary's rotation (docs/canary.md)
        # whose signed relays this gateway believes: every gateway site's public relay key
        {"name": RELAY_PEERS_ENV, "value": f"{RELAY_PEERS_DIR}/{RELAY_PEERS_FILE}"},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "keys", "mountPath": KEYS_DIR, "readOnly": True},
        {"name": "relay-peers", "mountPath": RELAY_PEERS_DIR, "readOnly": True},
        {"name": "records", "mountPath": RECORDS_DIR},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": NAME}},
        {"name": "keys", "secret": {"secretName": KEYS_SECRET}},
        {"name": "relay-peers", "configMap": {"name": RELAY_PEERS}},
        {"name": "records", "persistentVolumeClaim": {"claimName": RECORDS_CLAIM}},
    ]
    if signs_relays:
        # not optional: a gateway whose relays would go unsigned (and be refused) does not start without its key
        env.append({"name": RELAY_KEY_ENV, "value": f"{RELAY_KEY_DIR}/{RELAY_KEY_FILE}"})
        mounts.append({"name": "relay-key", "mountPath": RELAY_KEY_DIR, "readOnly": True})
        volumes.append({"name": "relay-key", "secret": {"secretName": RELAY_KEY_SECRET, "defaultMode": 0o400}})
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
        "volumeMounts": mounts,
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
                    "volumes": volumes,
                },
            },
        },
    }


def _surge_services(plan: Plan, site_id: str, namespace: str) -> list[Manifest]:
    """A direct Service per surge replica of a rollout here: the gateway's entry of its own (endpoints.py).
    The canary renders the replicas' (`REPLICA-direct`); it probes no surge, so these are the gateway's."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": surge_direct_service_name(s.placement.deployment, s.replaces),
                "namespace": namespace,
                "labels": L.common_labels("gateway", NAME) | {L.DEPLOYMENT: s.placement.deployment},
            },
            "spec": {
                "selector": ENGINE_LABELS
                | {L.REPLICA: surge_name(s.placement.deployment, s.replaces), L.DEPLOYMENT: s.placement.deployment},
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
            },
        }
        for s in site_surges(plan, site_id)
    ]


def _records_claim(namespace: str, gw: GatewayConfig, labels: dict[str, str]) -> Manifest:
    """The meter's folder, kept across restarts and rollouts until its closed days are collected."""
    # one pod (Recreate): ReadWriteOnce; several pods on several nodes need a ReadWriteMany class
    access_mode = "ReadWriteOnce" if gw.replicas == 1 else "ReadWriteMany"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": RECORDS_CLAIM, "namespace": namespace, "labels": labels},
        "spec": claim_spec(access_mode, gw.records_storage, gw.records_storage_class),
    }


def _egress(site: TrustedSite, site_id: str, namespace: str, labels: dict[str, str], gw: GatewayConfig) -> Manifest:
    dns_peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    egress: list[dict[str, Any]] = [
        {"to": [dns_peer], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {
            "to": [{"podSelector": {"matchLabels": ENGINE_LABELS}}],
            "ports": [{"protocol": "TCP", "port": ENGINE_PORT}],
        },
        {"to": [{"podSelector": {"matchLabels": PROBER_LABELS}}], "ports": [{"protocol": "TCP", "port": PROBER_PORT}]},
    ]
    if gw.routing == "inference-extension":
        # the inference Gateway's proxy pods, in whichever namespace its implementation runs them
        proxy = {"namespaceSelector": {}, "podSelector": {"matchLabels": {GATEWAY_NAME_LABEL: INFERENCE_GATEWAY}}}
        egress.append({"to": [proxy]})
    allowed = site.config.sites[site_id].egress_allowed  # other sites' gateways and external providers
    if allowed:
        egress.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in allowed]})
    return network_policy(f"{NAME}-egress", namespace, labels, GATEWAY_LABELS, "Egress", egress)


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
    """A GIE InferencePool over the deployment's engines here, its endpoint picker, and the HTTPRoute to it."""
    labels = L.common_labels("inference-pool", deployment)
    epp = f"{deployment}-epp"
    pool = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": deployment, "namespace": namespace, "labels": labels},
        "spec": {
            # the engine pods of both engines: the same selector as the deployment's Service
            "selector": {"matchLabels": ENGINE_LABELS | {L.DEPLOYMENT: deployment}},
            "targetPorts": [{"number": ENGINE_PORT}],
            "endpointPickerRef": {"name": epp, "port": {"number": EPP_PORT}, "failureMode": "FailClose"},
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
                    # the tenant gateway names the deployment in this header (gateway/config.py)
                    "matches": [
                        {
                            "path": {"type": "PathPrefix", "value": "/v1"},
                            "headers": [{"name": MODEL_HEADER, "value": deployment}],
                        }
                    ],
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": deployment}
                    ],
                }
            ],
        },
    }
    # the engines admit only the tenant gateway, the prober and Prometheus (serving.workloads); with this
    # routing the inference Gateway's proxy forwards to them and the picker reads their /metrics
    proxy = {"namespaceSelector": {}, "podSelector": {"matchLabels": {GATEWAY_NAME_LABEL: INFERENCE_GATEWAY}}}
    picker = {"podSelector": {"matchLabels": {"inferencepool": epp}}}
    rule = {"from": [proxy, picker], "ports": [{"protocol": "TCP", "port": ENGINE_PORT}]}
    engines = ENGINE_LABELS | {L.DEPLOYMENT: deployment}
    ingress = network_policy(f"{deployment}-engines-ingress", namespace, labels, engines, "Ingress", [rule])
    return [pool, route, ingress, *_endpoint_picker(deployment, namespace)]


def epp_config() -> str:
    """The endpoint picker's EndpointPickerConfig (GIE v1.5.0's default profile, the picker named).

    Scorers: queue depth and KV-cache use (weight 2 each), prefix-cache locality (3), then the replica
    with the highest score. The metrics extractor reads each pod's engine from `app.kubernetes.io/name`
    (vllm or sglang, as serving labels it), so one pool may mix engines. Flow control (its feature gate)
    queues a saturated pool's requests by their InferenceObjective's priority and takes each priority's
    flows, the fairness ids (the tenants) the gateway sends, in turn (`round-robin-fairness-policy`).
    """
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "featureGates": ["flowControl"],
        "plugins": [
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "prefix-cache-scorer"},
            {"type": "max-score-picker"},
            {"type": "metrics-data-source", "parameters": {"scheme": "http", "path": "/metrics"}},
            {
                "type": "core-metrics-extractor",
                "parameters": {"engineLabelKey": "app.kubernetes.io/name", "defaultEngine": "vllm"},
            },
            # the default (global-strict) serves flows first come, first served: round robin is per tenant
            {"type": "round-robin-fairness-policy"},
        ],
        "flowControl": {"defaultPriorityBand": {"fairnessPolicyRef": "round-robin-fairness-policy"}},
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                    {"pluginRef": "max-score-picker"},
                ],
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def _endpoint_picker(deployment: str, namespace: str) -> list[Manifest]:
    """GIE's endpoint picker for one pool, as its v1.5.0 chart (config/charts/epplib) deploys it."""
    name = f"{deployment}-epp"
    selector = {"inferencepool": name}
    labels = L.common_labels("endpoint-picker", name) | {"app.kubernetes.io/name": "epp"} | selector
    meta = {"name": name, "namespace": namespace, "labels": labels}
    ports = [
        {"name": "grpc", "containerPort": EPP_PORT},
        {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT},
        {"name": "metrics", "containerPort": EPP_METRICS_PORT},
    ]
    probe = {"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}}
    container = {
        "name": "epp",
        "image": EPP_IMAGE,
        "args": [
            *("--pool-name", deployment, "--pool-namespace", namespace),
            *("--pool-group", "inference.networking.k8s.io"),
            *("--config-file", f"/config/{EPP_CONFIG_FILE}", "--zap-encoder", "json", "--v", "1"),
            "--tracing=false",
            # the metrics port is scraped from inside the namespace; no TokenReview RBAC needed
            "--metrics-endpoint-auth=false",
        ],
        "ports": ports,
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "livenessProbe": {**probe, "initialDelaySeconds": 5, "periodSeconds": 10},
        "readinessProbe": {**probe, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "16Gi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/config"}],
    }
    read = ["get", "watch", "list"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": read},
                {
                    "apiGroups": ["inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": read,
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {EPP_CONFIG_FILE: epp_config()}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                # one replica (upstream's recommendation: the prefix-cache scorer's state is in memory);
                # Recreate, so the old pod is gone before the new one starts. See docs/gateway.md, known limits
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "terminationGracePeriodSeconds": 130,
                        "containers": [container],
                        "volumes": [{"name": "config", "configMap": {"name": name}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "selector": selector,
                "ports": [
                    {"name": "grpc-ext-proc", "protocol": "TCP", "port": EPP_PORT, "targetPort": "grpc"},
                    {"name": "http-metrics", "protocol": "TCP", "port": EPP_METRICS_PORT, "targetPort": "metrics"},
                ],
                "type": "ClusterIP",
            },
        },
    ]
