"""What the gateway tells the Inference Extension's endpoint picker about a request (`routing: inference-extension`).

The route's header names the deployment (the HTTPRoute matches it); with the picker's flow control on
(the `flowControl` feature gate of its EndpointPickerConfig), the tenant travels as the fairness id
and the request names the InferenceObjective of its allocation band, whose priority orders the bands.
Header names as GIE v1.5.0's `pkg/epp/metadata` spells them.

A deployment's tenants are in one of three bands (the allocation policy): `owner` (the tenant whose
dedicated replicas these are), `lent` (the others, on a deployment all of whose replicas are the
owner's, lent beyond its reserve) and `pool` (the others, on pool replicas).
"""

from __future__ import annotations

from typing import Literal

from llm_fabric.gateway.runtime.settings import DeploymentAccess

MODEL_HEADER = "X-Gateway-Model-Name"
FAIRNESS_HEADER = "x-gateway-inference-fairness-id"
OBJECTIVE_HEADER = "x-gateway-inference-objective"

Band = Literal["owner", "lent", "pool"]
# flow control serves a higher priority first, and is fair between the flows (tenants) of one priority
BAND_PRIORITY: dict[Band, int] = {"owner": 10, "lent": 0, "pool": 0}


def band_of(tenant: str, dep: DeploymentAccess) -> Band:
    if dep.owner == tenant:
        return "owner"
    return "lent" if dep.lent else "pool"


def bands_of(dep: DeploymentAccess) -> list[Band]:
    """The bands a deployment's requests can be in, owner first."""
    others: Band = "lent" if dep.lent else "pool"
    return ["owner", others] if dep.owner is not None else [others]


def objective_name(deployment: str, band: Band) -> str:
    """The InferenceObjective a request of `band` on `deployment` names."""
    return f"{deployment}-{band}"


def picker_headers(tenant: str, deployment: str, dep: DeploymentAccess) -> dict[str, str]:
    """The headers of a request the gateway sends to its site's inference Gateway."""
    return {
        MODEL_HEADER: deployment,
        FAIRNESS_HEADER: tenant,
        OBJECTIVE_HEADER: objective_name(deployment, band_of(tenant, dep)),
    }
