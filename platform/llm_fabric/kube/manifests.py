"""Kubernetes manifests as plain dicts, grouped into bundles: the one definition both delivery paths use.

A bundle is one concept (a served model, a tenant's queue, the alert rules); the Pulumi components
wrap a bundle's manifests unchanged, and `fabric render` writes the same dicts as YAML files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from llm_fabric.kube.labels import PROMETHEUS_LABELS

Manifest = dict[str, Any]

STACKS = ("serving", "allocations", "observability")


@dataclass
class Bundle:
    concept: str
    name: str
    objects: list[Manifest] = field(default_factory=list)


def object_id(obj: Manifest) -> str:
    """`kind/namespace/name` (namespace omitted for cluster-scoped objects): unique in one cluster."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{obj['kind']}/{ns}/{meta['name']}" if ns else f"{obj['kind']}/{meta['name']}"


def file_name(obj: Manifest) -> str:
    """`kind-name.yaml` in lower case: kinds do not collide inside one namespace-scoped stack."""
    return f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def all_objects(bundles: list[Bundle]) -> list[Manifest]:
    return [obj for bundle in bundles for obj in bundle.objects]


def network_policy(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    pods: Mapping[str, str],
    direction: Literal["Ingress", "Egress"],
    rules: list[dict[str, Any]],
) -> Manifest:
    """A NetworkPolicy for the pods matching `pods`: only `rules` in `direction` (policies of one direction add up)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"podSelector": {"matchLabels": pods}, "policyTypes": [direction], direction.lower(): rules},
    }


def prometheus_peer(namespace: str) -> dict[str, Any]:
    """A NetworkPolicy peer: the Prometheus pods of the site's monitoring namespace (the scrapes)."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "podSelector": {"matchLabels": dict(PROMETHEUS_LABELS)},
    }


def claim_spec(access_mode: str, storage: str, storage_class: str | None) -> dict[str, Any]:
    """A PersistentVolumeClaim's spec: one access mode, its size, and the class where the site names one."""
    spec: dict[str, Any] = {"accessModes": [access_mode], "resources": {"requests": {"storage": storage}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return spec
