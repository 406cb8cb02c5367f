"""A deployment's allocation bands as GIE InferenceObjectives (`routing: inference-extension`).

One InferenceObjective per band of the deployment (`gateway.runtime.inference`: owner, lent, pool), on
its InferencePool, with the band's priority: the endpoint picker's flow control serves the owner's
band first and shares a band fairly among its tenants (the gateway sends each request's tenant as the
fairness id and names its band's objective). InferenceObjective is `inference.networking.x-k8s.io/v1alpha2`,
last shipped with GIE v1.5.0, the picker's pinned release.
"""

from __future__ import annotations

from llm_fabric.gateway.runtime.inference import BAND_PRIORITY, bands_of, objective_name
from llm_fabric.gateway.runtime.settings import DeploymentAccess
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Manifest


def inference_objectives(deployment: str, namespace: str, dep: DeploymentAccess) -> list[Manifest]:
    labels = L.common_labels("inference-pool", deployment)
    return [
        {
            "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
            "kind": "InferenceObjective",
            "metadata": {"name": objective_name(deployment, band), "namespace": namespace, "labels": labels},
            "spec": {
                "poolRef": {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": deployment},
                "priority": BAND_PRIORITY[band],
            },
        }
        for band in bands_of(dep)
    ]
