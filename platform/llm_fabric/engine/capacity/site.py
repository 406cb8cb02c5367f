"""Capacity of each deployment of a site repo, as declared (recipe, quantization, TP, GPU model).

The GPU model is the deployment's first `placement.gpu_models` entry, else the model of its first
pinned node, else of the first active node; the context is the deployment's p95 prompt length
(the sessions that fill the KV cache), else its max_model_len, else the recipe's context.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.engine.capacity.model import CapacityEstimate, LatencyTarget, estimate
from llm_fabric.engine.recipes import context_limit, get_recipe
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment


@dataclass(frozen=True)
class DeploymentCapacity:
    deployment: str
    estimate: CapacityEstimate

    def as_dict(self) -> dict[str, object]:
        return {"deployment": self.deployment, **self.estimate.as_dict()}


def _gpu_id(site: SiteRepo, dep: Deployment) -> str:
    if dep.placement.gpu_models:
        return dep.placement.gpu_models[0]
    for name in dep.placement.nodes:
        if name in site.nodes:
            return site.nodes[name].gpus.catalog_id
    for node in site.nodes.values():
        if node.status == "active":
            return node.gpus.catalog_id
    raise UsageError(f"deployment `{dep.name}` has no GPU model to size against", hint="add placement.gpu_models")


def deployment_capacity(site: SiteRepo, name: str) -> DeploymentCapacity:
    dep = site.deployments[name]
    recipe = get_recipe(dep.recipe)
    gpu = load_gpu_catalog().get(_gpu_id(site, dep))
    context = dep.context.p95 if dep.context else context_limit(recipe, dep.max_model_len)
    tp = dep.tensor_parallel_size
    users = dep.target.concurrent_sessions if dep.target else 1
    utilization = site.config.defaults.gpu_memory_utilization
    target = dep.target
    est = estimate(
        recipe,
        gpu,
        tp or min(max(recipe.tensor_parallel_sizes), gpu.gpus_per_node),
        tensor_parallel_size=tp,
        quantization=dep.quantization,
        kv_cache_dtype=dep.kv_cache_dtype,
        context_tokens=context,
        users=users,
        gpu_memory_utilization=utilization,
        max_num_seqs=dep.max_num_seqs,
        input_tokens=dep.context.p50 if dep.context else None,
        output_tokens=target.output_tokens if target else None,
        parallelism=dep.parallelism if tp is None else "tp",
        latency_target=LatencyTarget(target.itl_ms, target.ttft_ms) if target else None,
    )
    return DeploymentCapacity(deployment=name, estimate=est)


def site_capacity(site: SiteRepo) -> list[DeploymentCapacity]:
    return [deployment_capacity(site, name) for name in sorted(site.deployments)]
