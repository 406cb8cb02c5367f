"""NVIDIA's dcgm-exporter on a site's GPU nodes, and the ServiceMonitor through which Prometheus scrapes it.

The GPU alerts (`gpu_alerts`) and the dashboard read DCGM's fields; nothing else in the fabric produces
them, so the observability stack renders the exporter: a DaemonSet on the site's NVIDIA nodes (the
fabric's own node labels `fabric.llm/site` and `fabric.llm/gpu-model` select them; it tolerates the
nodes' manifest taints and the GPU taint, as the engines do), its Service, the ServiceMonitor, and a
ConfigMap of the collected fields. Where the site declares that the GPU Operator runs dcgm-exporter
(`cluster.dcgm_exporter: gpu-operator`), a second exporter on the same GPUs would only compete for
DCGM, so the fabric renders the ServiceMonitor alone, pointed at the Operator's Service.
Either way the scrape relabels the pod's node as `node`, the label the alerts name.
"""

from __future__ import annotations

from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Manifest
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.sites import TrustedSite

# NVIDIA's release (DCGM 4.2.3, exporter 4.1.3): nvcr.io/nvidia/k8s/dcgm-exporter on NGC
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"
DCGM_PORT = 9400
NAME = "llm-fabric-dcgm-exporter"
SELECTOR = {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/part-of": L.PART_OF}
COUNTERS_DIR = "/etc/dcgm-exporter/llm-fabric"
# what the GPU Operator names its exporter's Service and port (its state-dcgm-exporter assets)
OPERATOR_SELECTOR = {"app": "nvidia-dcgm-exporter"}
OPERATOR_PORT = "gpu-metrics"

# DCGM field -> (Prometheus type, help): every field the alerts and the dashboard read
COLLECTED: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last Xid error encountered"),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)"),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)"),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)"),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)"),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "Memory temperature (in C)"),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("counter", "Total number of single-bit volatile ECC errors"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "Whether remapping of rows has failed"),
}


def counters_csv() -> str:
    """dcgm-exporter's collectors file: `field, type, help` per line."""
    lines = ["# DCGM FIELD, Prometheus metric type, help message"]
    lines += [f"{name}, {kind}, {help_}." for name, (kind, help_) in COLLECTED.items()]
    return "\n".join(lines) + "\n"


def build_gpu_metrics(site: TrustedSite, site_id: str, namespace: str) -> list[Manifest]:
    """The exporter's objects for one site: all four, the ServiceMonitor alone, or none without NVIDIA nodes."""
    cluster = site.config.sites[site_id].cluster
    nodes = [n for _, n in sorted(site.nodes.items()) if n.site == site_id and n.gpus.vendor == "nvidia"]
    if cluster.dcgm_exporter == "gpu-operator":
        return [_service_monitor(namespace, OPERATOR_SELECTOR, OPERATOR_PORT, [cluster.gpu_operator_namespace])]
    if not nodes:
        return []
    labels = L.common_labels("gpu-metrics", "dcgm-exporter") | SELECTOR
    counters: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{NAME}-counters", "namespace": namespace, "labels": labels},
        "data": {"counters.csv": counters_csv()},
    }
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": dict(SELECTOR),
            "ports": [{"name": "metrics", "port": DCGM_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }
    monitor = _service_monitor(namespace, SELECTOR, "metrics", [namespace])
    return [counters, _daemon_set(site_id, namespace, labels, nodes), service, monitor]


def _daemon_set(site_id: str, namespace: str, labels: dict[str, str], nodes: list[NodeManifest]) -> Manifest:
    models = sorted({n.gpus.catalog_id for n in nodes})
    taints = sorted({t for n in nodes for t in L.node_taints(n)}, key=lambda t: (t.key, t.value or "", t.effect))
    tolerations = [t.as_toleration() for t in taints]
    tolerations.append({"key": L.GPU_RESOURCE["nvidia"], "operator": "Exists", "effect": "NoSchedule"})
    container = {
        "name": "dcgm-exporter",
        "image": DCGM_EXPORTER_IMAGE,
        "args": ["-f", f"{COUNTERS_DIR}/counters.csv"],
        "env": [
            # the exporter maps each GPU to the pod using it through the kubelet's pod-resources socket
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "DCGM_EXPORTER_LISTEN", "value": f":{DCGM_PORT}"},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "ports": [{"name": "metrics", "containerPort": DCGM_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": DCGM_PORT}, "periodSeconds": 10},
        "volumeMounts": [
            {"name": "counters", "mountPath": COUNTERS_DIR, "readOnly": True},
            {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": L.SITE, "operator": "In", "values": [site_id]},
                                            {"key": L.GPU_MODEL, "operator": "In", "values": models},
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "tolerations": tolerations,
                    "containers": [container],
                    "volumes": [
                        {"name": "counters", "configMap": {"name": f"{NAME}-counters"}},
                        {"name": "pod-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}},
                    ],
                },
            },
        },
    }


def _service_monitor(namespace: str, selector: dict[str, str], port: str, namespaces: list[str]) -> Manifest:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": NAME,
            "namespace": namespace,
            "labels": L.common_labels("gpu-metrics", "dcgm-exporter"),
        },
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "namespaceSelector": {"matchNames": namespaces},
            "endpoints": [
                {
                    "port": port,
                    "path": "/metrics",
                    "interval": "15s",
                    # the exporter's own `pod`/`namespace` labels name the workload on the GPU, not the exporter
                    "honorLabels": True,
                    "relabelings": [
                        {
                            "action": "replace",
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "targetLabel": "node",
                        }
                    ],
                }
            ],
        },
    }
