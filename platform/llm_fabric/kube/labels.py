"""Label and taint conventions shared by the resource builders and the provisioning playbook.

A node carries the labels of its manifest plus the fabric's own (owner, site, tier, GPU model), so
that Kueue flavors, node affinity and the ledger's relabelling all key on the same names.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from llm_fabric.errors import Problem
from llm_fabric.site.models import NodeManifest

PREFIX = "fabric.llm"
OWNER = f"{PREFIX}/owner"
SITE = f"{PREFIX}/site"
TIER = f"{PREFIX}/tier"
GPU_MODEL = f"{PREFIX}/gpu-model"
NODE = f"{PREFIX}/node"
DEPLOYMENT = f"{PREFIX}/deployment"
REPLICA = f"{PREFIX}/replica"
DEDICATED_FOR = f"{PREFIX}/dedicated-for"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
HOSTNAME = "kubernetes.io/hostname"

PART_OF = "llm-fabric"
MANAGED_BY = "llm-fabric"

GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
# the tenant gateway's pods (gateway/objects/gateway.py): the engines' and the prober's ingress admit them,
# and those are rendered in layers below the gateway's
GATEWAY_LABELS = {"app.kubernetes.io/name": "litellm", "app.kubernetes.io/component": "gateway"}
# the Prometheus pods (prometheus-operator's label) of the site's monitoring namespace: they scrape
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}

_TAINT = re.compile(
    r"^(?P<key>[A-Za-z0-9./_-]+)(=(?P<value>[A-Za-z0-9._-]*))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)$"
)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None
    effect: str

    def as_toleration(self) -> dict[str, str]:
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}

    def as_kubectl(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value is not None else f"{self.key}:{self.effect}"


def parse_taint(text: str) -> Taint | None:
    """`key[=value]:Effect` as `kubectl taint` writes it, or None when it is not that."""
    match = _TAINT.match(text.strip())
    if match is None:
        return None
    return Taint(match["key"], match["value"], match["effect"])


def node_taints(node: NodeManifest) -> list[Taint]:
    return [t for t in (parse_taint(s) for s in node.taints) if t is not None]


def taint_problems(node: NodeManifest, path: object) -> list[Problem]:
    """Manifest taints that are not `key[=value]:Effect` (the provisioning and the pods would disagree)."""
    return [
        Problem(
            f"taint `{text}` is not key[=value]:Effect",
            field=f"taints[{i}]",
            hint="write it as `kubectl taint` does, e.g. fabric.llm/dedicated=ceitec:NoSchedule",
        )
        for i, text in enumerate(node.taints)
        if parse_taint(text) is None
    ]


def node_labels(node: NodeManifest) -> dict[str, str]:
    """Labels the provisioning puts on the Kubernetes node: the manifest's, then the fabric's own (they win)."""
    labels = dict(node.labels)
    labels.update(
        {
            OWNER: node.owner,
            SITE: node.site,
            TIER: node.tier,
            GPU_MODEL: node.gpus.catalog_id,
            NODE: node.name,
        }
    )
    return labels


def dns_name(*parts: str, limit: int = 63) -> str:
    """Join parts into a DNS label; a too-long result keeps its start and gets a stable hash suffix."""
    name = "-".join(p.strip("-") for p in parts if p).lower()
    name = re.sub(r"[^a-z0-9-]+", "-", name).strip("-")
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def common_labels(component: str, instance: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": instance,
    }
