"""The figures of a plan: capacity per deployment, allocations per owner, GPUs per site, and the
shortfalls said in words (which rule or which lack of GPUs keeps which deployment from its target).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from llm_fabric.engine.backends import backend, command_for, deployment_engine, fingerprint_for
from llm_fabric.engine.capacity.model import CapacityEstimate
from llm_fabric.engine.capacity.parallelism import Layout
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.fingerprint import ConfigFingerprint
from llm_fabric.engine.fingerprint import fingerprint as fingerprint_of
from llm_fabric.engine.recipes import DEFAULT_ENGINE, EngineName, Recipe, context_limit
from llm_fabric.hardware.catalog import GpuCatalog, GpuSpec
from llm_fabric.plan.document import (
    DeploymentCapacity,
    NodeEntry,
    OwnerAllocation,
    ReplicaPlacement,
    SiteUsage,
    SpeedFigures,
)
from llm_fabric.plan.sizing import contexts, replica_estimates
from llm_fabric.plan.solver.placement import Demand
from llm_fabric.policies.allocation import OwnerShare
from llm_fabric.policies.sovereignty import external_fallback_allowed, prompt_logging_allowed
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment, PolicySet
from llm_fabric.site.weights_lock import WeightsLock


@dataclass(frozen=True)
class EngineSetup:
    """A replica's engine command and the fingerprint of the same serving options, with its served name."""

    args: list[str]
    env: dict[str, str]
    fingerprint: ConfigFingerprint
    served_model_name: str

    def replica_fields(self, lock: WeightsLock) -> dict[str, Any]:
        """What the plan records of it for every reader (`ReplicaPlacement`), resolved here once: the
        checkpoint and context length as the fingerprint has them (the engine's own `checked`), the
        revision `lock` pins the checkpoint at, which is part of the fingerprint (other weights answer
        otherwise: a canary reference recorded for one revision is not compared after a re-pin). The
        engine opens the pinned snapshot offline, without `--revision`, so the lock is what says it; an
        unpinned replica's fingerprint is the command's alone."""
        fields = self.fingerprint.fields
        locked = lock.checkpoints.get(fields.checkpoint)
        config = self.fingerprint
        if locked is not None and fields.revision is None:
            config = fingerprint_of(fields.model_copy(update={"revision": locked.revision}))
        return {
            "engine_args": list(self.args),
            "engine_env": dict(self.env),
            "config_fingerprint": config,
            "checkpoint": fields.checkpoint,
            "revision": locked.revision if locked is not None else None,
            "served_model_name": self.served_model_name,
            "context_length": fields.max_model_len,
        }


def engine_for(
    recipe: Recipe,
    dep: Deployment,
    gpu: GpuSpec,
    layout: Layout,
    quant: str,
    util: float,
    *,
    priority: bool,
    node_rank: int = 0,
    engine: EngineName = DEFAULT_ENGINE,
) -> EngineSetup:
    """The replica's engine arguments and environment, and the fingerprint of the same serving options."""
    serving = ServingArgs(
        recipe,
        gpu,
        layout=layout,
        node_rank=node_rank,
        quantization=quant,
        kv_cache_dtype=dep.kv_cache_dtype,
        max_model_len=dep.max_model_len,
        gpu_memory_utilization=util,
        max_num_seqs=dep.max_num_seqs,
        max_output_tokens=dep.generation.max_output_tokens,
        presence_penalty=dep.generation.presence_penalty,
        priority_scheduling=priority,
        served_model_name=dep.name,  # clients address the federation's deployment, not the recipe
    )
    cmd = command_for(engine, serving)
    return EngineSetup(list(cmd.args), dict(cmd.env), fingerprint_for(engine, serving), serving.model_name)


def _summary(recipe: Recipe, dep: Deployment, reps: list[ReplicaPlacement], quant: str) -> str:
    shapes = Counter(f"{r.layout(len(r.gpu_indices)).describe()} x {r.gpu_model}" for r in reps)
    parts = [", ".join(f"{n}x({s})" for s, n in sorted(shapes.items())) or "not placed", quant]
    parts.append(f"kv {dep.kv_cache_dtype or 'auto'}")
    parts.append(f"max-model-len {reps[0].context_length if reps else context_limit(recipe, dep.max_model_len)}")
    engine = reps[0].engine if reps else deployment_engine(dep, recipe)
    tools, reasoning = backend(engine).parsers(recipe)
    if engine != DEFAULT_ENGINE:
        parts.append(engine)
    if tools:
        parts.append(f"tools {tools}")
    if reasoning:
        parts.append(f"reasoning {reasoning}")
    if any(r.dedicated_for for r in reps):
        parts.append("priority scheduling")
    return ", ".join(parts)


def _estimates(
    recipe: Recipe, dep: Deployment, reps: list[ReplicaPlacement], catalog: GpuCatalog, util: float
) -> list[dict[str, CapacityEstimate]]:
    cache: dict[tuple[str, Layout], dict[str, CapacityEstimate]] = {}
    out = []
    for r in reps:
        key = (r.gpu_model, r.layout(len(r.gpu_indices)))
        if key not in cache:
            cache[key] = replica_estimates(dep, recipe, catalog.get(r.gpu_model), key[1], r.quantization, util)
        out.append(cache[key])
    return out


def _target_sessions(est: CapacityEstimate) -> int:
    """Sessions at the target context, and at the latency target when the deployment sets one."""
    if est.latency_target:
        return (est.concurrency_at_target or 0) * est.replicas
    return int(est.max_concurrency)


def _speed(ests: list[dict[str, CapacityEstimate]], kind: str) -> SpeedFigures | None:
    """All replicas with every p50 slot busy: totals add up, per-stream figures are the slowest replica's."""
    speeds = [getattr(e["loaded"], kind) for e in ests if getattr(e["loaded"], kind) is not None]
    if not speeds:
        return None
    return SpeedFigures(
        output_tokens_per_s_total=round(sum(x.output_tokens_per_s_total for x in speeds), 1),
        output_tokens_per_s_per_user=round(min(x.output_tokens_per_s_per_user for x in speeds), 1),
        itl_ms=round(max(x.itl_ms for x in speeds), 2),
        ttft_ms=round(max(x.ttft_ms for x in speeds), 1),
        error_band=speeds[0].error_band,
    )


def deployment_capacity(
    recipe: Recipe,
    dep: Deployment,
    demand: Demand,
    policies: PolicySet,
    replicas: list[ReplicaPlacement],
    catalog: GpuCatalog,
    util: float,
) -> DeploymentCapacity:
    reps = [r for r in replicas if r.deployment == dep.name]
    quant = reps[0].quantization if reps else recipe.quantization(dep.quantization)[0]
    ests = _estimates(recipe, dep, reps, catalog, util)
    ctx = contexts(dep, recipe)
    target_total = sum(_target_sessions(e["target"]) for e in ests) if dep.target else None
    if dep.target is not None:
        per = min((_target_sessions(e["target"]) for e in ests), default=0)
        wanted = -(-dep.target.concurrent_sessions // per) if per else demand.max_replicas
        met = (target_total or 0) >= dep.target.concurrent_sessions
    else:
        wanted = dep.replicas or 0
        met = len(reps) >= wanted
    return DeploymentCapacity(
        deployment=dep.name,
        recipe=recipe.id,
        quantization=quant,
        kv_cache_dtype=dep.kv_cache_dtype,
        replicas_wanted=wanted,
        replicas_planned=len(reps),
        target_sessions=dep.target.concurrent_sessions if dep.target else None,
        target_context_tokens=ctx.target,
        context_p50=ctx.p50,
        context_p95=ctx.p95,
        weights_gb=round(float(ests[0]["p50"].weights_gb), 1) if ests else 0.0,
        kv_pool_gb=round(min(float(e["p50"].kv_pool_gb) for e in ests), 1) if ests else 0.0,
        max_concurrency_p50=sum(int(e["p50"].max_concurrency) for e in ests),
        max_concurrency_p95=sum(int(e["p95"].max_concurrency) for e in ests),
        max_concurrency_target=target_total,
        decode_tokens_per_s_single=round(
            min((float(e["p50"].decode_tokens_per_s_single) for e in ests), default=0.0), 1
        ),
        decode_tokens_per_s_per_user=round(
            min((float(e["loaded"].decode_tokens_per_s_per_user) for e in ests), default=0.0), 1
        ),
        decode_tokens_per_s_total=round(sum(float(e["loaded"].decode_tokens_per_s_total) for e in ests), 1),
        ceiling=_speed(ests, "ceiling"),
        expected=_speed(ests, "expected"),
        parallelism=", ".join(sorted({r.layout(len(r.gpu_indices)).describe() for r in reps})),
        engine_summary=_summary(recipe, dep, reps, quant),
        data_classes=list(dep.data_classes),
        prompt_logging=prompt_logging_allowed(policies, dep.data_classes),
        external_fallback=external_fallback_allowed(policies, dep.data_classes),
        met=met,
    )


def owner_allocations(
    site: SiteRepo, shares: dict[str, OwnerShare], replicas: list[ReplicaPlacement]
) -> dict[str, OwnerAllocation]:
    out: dict[str, OwnerAllocation] = {}
    for owner, share in shares.items():
        mine = [r for r in replicas if r.owner == owner]
        dedicated = sum(r.gpus for r in mine if r.dedicated_for == owner)
        held = max(share.dedicated_gpus, dedicated)
        out[owner] = OwnerAllocation(
            owner=owner,
            contributed_gpus=share.contributed,
            dedicated_gpus=held,
            lent_gpus=max(0, share.contributed - held) if share.lends else 0,
            used_by_pool_gpus=sum(r.gpus for r in mine if r.dedicated_for != owner),
            lend_surplus=share.lend_surplus,
            out_of_service_gpus=share.out_of_service,
            out_of_service_nodes=sorted(
                n.name for n in site.nodes.values() if n.owner == owner and n.status == "cordoned"
            ),
            dedicated_shortfall_gpus=share.dedicated_unbacked,
        )
    return out


def site_usage(site: SiteRepo, replicas: list[ReplicaPlacement]) -> dict[str, SiteUsage]:
    out: dict[str, SiteUsage] = {}
    for name, spec in sorted(site.config.sites.items()):
        total = sum(n.gpus.count for n in site.nodes.values() if n.site == name and n.status == "active")
        used = sum(r.gpus for r in replicas if r.site == name)
        out[name] = SiteUsage(
            site=name, country=spec.jurisdiction.country, gpus_total=total, gpus_used=used, gpus_free=total - used
        )
    return out


def node_entries(site: SiteRepo) -> list[NodeEntry]:
    return [
        NodeEntry(
            name=n.name, site=n.site, owner=n.owner, status=n.status, gpus=n.gpus.count, gpu_model=n.gpus.catalog_id
        )
        for n in sorted(site.nodes.values(), key=lambda n: n.name)
    ]
