"""A deployment's PodDisruptionBudget: how many of its engine pods a voluntary eviction (a node drain) may take.

It selects the deployment's engine pods (surge replicas included: they carry the deployment's labels), and
allows the deployment's `rollout.max_unavailable` of them to be evicted at once: the bound the rollout's
waves keep (docs/deploy.md "Rollouts").
"""

from __future__ import annotations

from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Manifest
from llm_fabric.site.models import Deployment


def disruption_budget(deployment: Deployment, namespace: str, engine_labels: dict[str, str]) -> Manifest:
    # maxUnavailable is never 0 (RolloutPolicy: >= 1): a budget of 0 would block every node drain forever,
    # a single-replica deployment's included; its one pod may go, which the review shows as an outage
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": deployment.name,
            "namespace": namespace,
            "labels": L.common_labels("serving", deployment.name) | {L.DEPLOYMENT: deployment.name},
        },
        "spec": {
            "maxUnavailable": deployment.rollout.max_unavailable,
            "selector": {"matchLabels": engine_labels | {L.DEPLOYMENT: deployment.name}},
        },
    }
