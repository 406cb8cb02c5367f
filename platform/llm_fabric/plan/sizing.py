"""Size a deployment on a GPU model: quantization, tensor-parallel size, and what one replica holds.

The hardware side of eligibility (the policy side is `llm_fabric.policies.eligibility`): the
quantization must run natively on the GPU's architecture (kernel matrix) unless the recipe accepts
vLLM's weight-only fallback for it, the replica must stay inside one node, and the weights plus a
useful KV pool must fit (capacity model). Each refusal is said in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.engine.capacity import CapacityEstimate, estimate
from llm_fabric.engine.recipes import Recipe
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.hardware.kernel_matrix import KernelMatrix
from llm_fabric.site.models import Deployment

DEFAULT_P50 = 1024
DEFAULT_P95 = 32768


@dataclass(frozen=True)
class Contexts:
    p50: int
    p95: int
    target: int | None

    @property
    def sizing(self) -> int:
        """The context a replica is sized at: the target's, else the p95 (a replica must hold a long session)."""
        return self.target or self.p95


def contexts(dep: Deployment, recipe: Recipe) -> Contexts:
    longest = dep.max_model_len or recipe.architecture.max_context
    target = dep.target.context_tokens if dep.target else None
    if dep.context is not None:
        return Contexts(dep.context.p50, dep.context.p95, target)
    return Contexts(min(DEFAULT_P50, longest), min(target or DEFAULT_P95, longest), target)


@dataclass(frozen=True)
class Sizing:
    """One deployment on one GPU model and node size: a replica's shape, or why there is none."""

    gpu_model: str
    quantization: str
    tensor_parallel_size: int = 0
    sessions_per_replica: int = 0  # at the sizing context
    refusal: str | None = None
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _tp_candidates(dep: Deployment, recipe: Recipe, gpus_per_node: int) -> list[int] | str:
    if dep.tensor_parallel_size is not None:
        tp = dep.tensor_parallel_size
        if not _is_power_of_two(tp):
            return f"tensor_parallel_size {tp} is not a power of two"
        if tp > gpus_per_node:
            return f"tensor parallelism stays inside one node: {tp} GPUs asked, the node has {gpus_per_node}"
        return [tp]
    sizes = sorted(t for t in recipe.tensor_parallel_sizes if _is_power_of_two(t) and t <= gpus_per_node)
    return sizes or f"no tensor-parallel size of {recipe.id} fits in a node of {gpus_per_node} GPUs"


def _estimate(
    recipe: Recipe, gpu: GpuSpec, tp: int, quant: str, dep: Deployment, ctx: int, util: float, users: int = 1
) -> CapacityEstimate:
    return estimate(
        recipe,
        gpu,
        tp,
        tensor_parallel_size=tp,
        quantization=quant,
        kv_cache_dtype=dep.kv_cache_dtype,
        context_tokens=ctx,
        users=users,
        gpu_memory_utilization=util,
        max_num_seqs=dep.max_num_seqs,
    )


def size_on(
    dep: Deployment, recipe: Recipe, gpu: GpuSpec, gpus_per_node: int, matrix: KernelMatrix, util: float
) -> Sizing:
    try:
        quant, option = recipe.quantization(dep.quantization)
    except UsageError as exc:
        return Sizing(gpu.id, dep.quantization or "?", refusal=exc.message)
    native, why = matrix.is_native(gpu.architecture, quant)
    note = None
    if not native:
        if not option.weight_only_fallback:
            return Sizing(gpu.id, quant, refusal=f"{quant} does not run natively on {gpu.id} ({why})")
        note = f"{quant} runs weight-only on {gpu.id} ({why})"
    candidates = _tp_candidates(dep, recipe, gpus_per_node)
    if isinstance(candidates, str):
        return Sizing(gpu.id, quant, refusal=candidates)
    ctx = contexts(dep, recipe).sizing
    reason = "no tensor-parallel size fits"
    for tp in candidates:
        est = _estimate(recipe, gpu, tp, quant, dep, ctx, util)
        if est.fits and est.max_concurrency >= 1:
            return Sizing(gpu.id, quant, tp, int(est.max_concurrency), note=note)
        reason = est.reason or f"one session of {ctx} tokens does not fit on {tp} x {gpu.id}"
    return Sizing(gpu.id, quant, refusal=f"does not fit on {candidates[-1]} x {gpu.id}: {reason}")


def replica_estimates(
    dep: Deployment, recipe: Recipe, gpu: GpuSpec, tp: int, quant: str, util: float
) -> dict[str, CapacityEstimate]:
    """Capacity estimates of one replica at the p50, p95 and target contexts, and loaded (every p50 slot busy)."""
    ctx = contexts(dep, recipe)
    p50 = _estimate(recipe, gpu, tp, quant, dep, ctx.p50, util)
    out = {
        "p50": p50,
        "p95": _estimate(recipe, gpu, tp, quant, dep, ctx.p95, util),
        "loaded": _estimate(recipe, gpu, tp, quant, dep, ctx.p50, util, users=max(1, int(p50.max_concurrency))),
    }
    if ctx.target is not None:
        out["target"] = _estimate(recipe, gpu, tp, quant, dep, ctx.target, util)
    return out
