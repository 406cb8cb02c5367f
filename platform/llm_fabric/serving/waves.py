"""A rollout's order in what is delivered: which workloads of a site come up in which wave.

The plan's `rollout` (`fabric plan --base`) names, per deployment, the replicas a change restarts and the
surge replicas that stand in for them, by wave. Wave numbers are per site and global across deployments:
every deployment's wave 1 goes together, then wave 2. A workload in wave N carries Argo CD's
`argocd.argoproj.io/sync-wave: "N"` (Argo applies a wave once the previous one is healthy); `fabric render`
moves it to `waves/wave-N/` (for Flux, one Kustomization per wave, each depending on the one before) and the
Pulumi stack makes it depend on the workloads of the wave before (`deploy.components`). Everything else is the
base ("wave 0"), applied first. A plan without a rollout has no wave: what is delivered is what it was.
"""

from __future__ import annotations

from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest
from llm_fabric.plan.document import Plan
from llm_fabric.serving.workloads import ENGINE_LABELS, surge_name

# Argo CD's sync-wave annotation: a string holding an integer; objects without it are in wave 0
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
WORKLOAD_KINDS = ("Deployment", "LeaderWorkerSet")


def workload_waves(plan: Plan, site_id: str) -> dict[str, int]:
    """The name of each engine workload at `site_id` that the rollout orders -> its wave.

    A restarted replica is in the wave of its restart, a surge in the wave it comes up in; a removed replica
    is in the plan no more, so nothing of it is rendered (the controller prunes it with the base)."""
    if plan.rollout is None:
        return {}
    out: dict[str, int] = {}
    for rollout in plan.rollout.deployments:
        replicas = {r.index: r for r in plan.replicas_of(rollout.deployment)}
        surges = {s.replaces: s for s in rollout.surges}
        for wave in rollout.waves:
            for index in wave.surges:
                surge = surges.get(index)
                if surge is not None and surge.placement.site == site_id:
                    out[surge_name(rollout.deployment, index)] = wave.wave
            for index in wave.restarts:
                replica = replicas.get(index)
                if replica is not None and replica.site == site_id:
                    out[L.dns_name(replica.deployment, str(index))] = wave.wave
    return out


def mark_waves(bundles: list[Bundle], waves: dict[str, int]) -> None:
    """Annotate each ordered engine workload with its wave (the one mark render and Pulumi both read)."""
    if not waves:
        return
    for obj in (o for b in bundles for o in b.objects):
        if is_engine_workload(obj) and obj["metadata"]["name"] in waves:
            # a new dict: the pod template shares the workload's annotations, and a mark on the template
            # would restart the pod again when the next render drops it
            meta = obj["metadata"]
            meta["annotations"] = meta.get("annotations", {}) | {SYNC_WAVE: str(waves[meta["name"]])}


def is_engine_workload(obj: Manifest) -> bool:
    labels = obj["metadata"].get("labels", {})
    component = ENGINE_LABELS["app.kubernetes.io/component"]
    return obj["kind"] in WORKLOAD_KINDS and labels.get("app.kubernetes.io/component") == component


def wave_of(obj: Manifest) -> int:
    """The object's wave; 0: the base."""
    return int(obj["metadata"].get("annotations", {}).get(SYNC_WAVE, "0"))
