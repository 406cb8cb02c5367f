"""Fair shares of a deployment's capacity, from the allocation bands (`runtime/inference.py` names them).

The owner's allocation is its dedicated slots (of a deployment all its own that it lends: the reserve
it keeps); the rest of the capacity is split equally among the other tenants allowed on the
deployment. Admission shares a saturated deployment in proportion to these (`runtime/admission.py`);
with the Inference Extension the bands are InferenceObjectives, priority per band
(`gateway/objects/inference_objectives.py`).
"""

from __future__ import annotations

from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess


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
