"""Fair shares of a deployment's capacity, and the allocation bands they come from.

A deployment's tenants are in one of three bands (the allocation policy, `policies/allocation.py`):
`owner` (the tenant whose dedicated replicas these are), `lent` (the others, on a deployment all of
whose replicas are the owner's and lent beyond its reserve) and `pool` (the others, on pool replicas).
The owner's allocation is its dedicated slots (of a deployment all its own that it lends: the reserve
it keeps); the rest of the capacity is split equally among the other tenants allowed on the
deployment. Admission shares a saturated deployment in proportion to these (`runtime/admission.py`);
with the Inference Extension the bands are InferenceObjectives, priority per band
(`deploy/resources/inference_objectives.py`).
"""

from __future__ import annotations

from typing import Literal

from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess

Band = Literal["owner", "lent", "pool"]
# the endpoint picker's flow control serves a higher priority first and is fair within one
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
    """The InferenceObjective a request of `band` on `deployment` names (header x-gateway-inference-objective)."""
    return f"{deployment}-{band}"


def with_fair_shares(
    deployments: dict[str, DeploymentAccess], tenants: dict[str, TenantAccess]
) -> dict[str, DeploymentAccess]:
    """Each deployment with its tenants' allocations (`fair_shares`); one with a single tenant needs none."""
    out: dict[str, DeploymentAccess] = {}
    for name, dep in deployments.items():
        allowed = sorted(t for t, access in tenants.items() if name in access.groups)
        others = [t for t in allowed if t != dep.owner]
        shares = {t: v for t, v in dep.fair_shares.items() if t in allowed}
        rest = max(dep.capacity - sum(shares.values()), 0.0)
        shares |= {t: rest / len(others) for t in others}
        out[name] = dep.model_copy(update={"fair_shares": shares if len(shares) > 1 else {}})
    return out
