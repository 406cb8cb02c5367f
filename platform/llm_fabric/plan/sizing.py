"""Size a deployment on a GPU model: quantization, parallelism layout, and what one replica holds.

The hardware side of eligibility (the policy side is `llm_fabric.policies.eligibility`): the
quantization must run natively on the GPU's architecture (kernel matrix) unless the recipe accepts
vLLM's weight-only fallback for it, the replica must stay inside one node, and the weights plus a
useful KV pool must fit (capacity model). Each refusal is said in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.engine.capacity.model import DEFAULT_OUTPUT_TOKENS, CapacityEstimate, LatencyTarget, estimate
from llm_fabric.engine.capacity.parallelism import Layout, dp_ep_layout, tp_layout
from llm_fabric.engine.recipes import Recipe, context_limit
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
    longest = context_limit(recipe, dep.max_model_len)
    target = dep.target.context_tokens if dep.target else None
    if dep.context is not None:
        return Contexts(dep.context.p50, dep.context.p95, target)
    return Contexts(min(DEFAULT_P50, longest), min(target or DEFAULT_P95, longest), target)


@dataclass(frozen=True)
class Sizing:
    """One deployment on one GPU model and node size: a replica's shape, or why there is none."""

    gpu_model: str
    quantization: str
    layout: Layout | None = None
    sessions_per_replica: int = 0  # at the sizing context (and the latency target, when the deployment has one)
    refusal: str | None = None
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def tensor_parallel_size(self) -> int:
        return self.layout.tensor_parallel_size if self.layout else 0

    @property
    def gpus(self) -> int:
        """GPUs one replica takes (on one node: the plan's packing keeps replicas inside a node)."""
        return self.layout.gpus if self.layout else 0


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _tp_candidates(dep: Deployment, recipe: Recipe, gpus_per_node: int) -> list[Layout] | str:
    if dep.tensor_parallel_size is not None:
        tp = dep.tensor_parallel_size
        if not _is_power_of_two(tp):
            return f"tensor_parallel_size {tp} is not a power of two"
        if tp > gpus_per_node:
            return f"tensor parallelism stays inside one node: {tp} GPUs asked, the node has {gpus_per_node}"
        return [tp_layout(tp, gpus_per_node)]
    sizes = sorted(t for t in recipe.tensor_parallel_sizes if _is_power_of_two(t) and t <= gpus_per_node)
    return [tp_layout(t, gpus_per_node) for t in sizes] or (
        f"no tensor-parallel size of {recipe.id} fits in a node of {gpus_per_node} GPUs"
    )


def _dp_ep_candidates(dep: Deployment, recipe: Recipe, gpus_per_node: int) -> list[Layout]:
    if "dp-ep" not in recipe.parallelism or dep.tensor_parallel_size is not None or dep.parallelism == "tp":
        return []
    ranks, out = 2, []
    while ranks <= gpus_per_node:
        out.append(dp_ep_layout(ranks, gpus_per_node))
        ranks *= 2
    return out


def traffic(dep: Deployment, recipe: Recipe) -> tuple[int, int]:
    """Input and output tokens of a request, for the speed figures: the p50 prompt and the target's answer."""
    output = dep.target.output_tokens if dep.target else DEFAULT_OUTPUT_TOKENS
    return contexts(dep, recipe).p50, output


def _target(dep: Deployment) -> LatencyTarget:
    return LatencyTarget(dep.target.itl_ms, dep.target.ttft_ms) if dep.target else LatencyTarget()


def deployment_estimate(
    dep: Deployment,
    recipe: Recipe,
    gpu: GpuSpec,
    count: int,
    quant: str | None,
    ctx: int,
    util: float,
    *,
    users: int = 1,
    layout: Layout | None = None,
    gpus_per_node: int | None = None,
) -> CapacityEstimate:
    """The capacity model for a deployment: its KV dtype, max-num-seqs, traffic, latency target and parallelism;
    exactly `layout` when given, else the best layout of `count` GPUs in nodes of `gpus_per_node`."""
    isl, osl = traffic(dep, recipe)
    return estimate(
        recipe,
        gpu,
        count,
        quantization=quant,
        kv_cache_dtype=dep.kv_cache_dtype,
        context_tokens=ctx,
        users=users,
        gpu_memory_utilization=util,
        max_num_seqs=dep.max_num_seqs,
        input_tokens=isl,
        output_tokens=osl,
        parallelism=dep.parallelism,
        gpus_per_node=gpus_per_node,
        latency_target=_target(dep),
        layout=layout,
    )


def _estimate(
    recipe: Recipe, gpu: GpuSpec, layout: Layout, quant: str, dep: Deployment, ctx: int, util: float, users: int = 1
) -> CapacityEstimate:
    return deployment_estimate(dep, recipe, gpu, layout.gpus, quant, ctx, util, users=users, layout=layout)


def _first_fitting(
    candidates: list[Layout], recipe: Recipe, gpu: GpuSpec, quant: str, dep: Deployment, ctx: int, util: float
) -> tuple[Layout | None, int, str]:
    """The smallest layout that holds a session at the sizing context (and meets the latency target)."""
    reason = "no layout fits"
    for layout in candidates:
        est = _estimate(recipe, gpu, layout, quant, dep, ctx, util)
        sessions = est.concurrency_at_target if est.latency_target else est.max_concurrency
        if est.fits and sessions:
            return layout, int(sessions), ""
        reason = est.target_reason or est.reason or f"one session of {ctx} tokens does not fit on {layout.describe()}"
    return None, 0, reason


def size_on(
    dep: Deployment, recipe: Recipe, gpu: GpuSpec, gpus_per_node: int, matrix: KernelMatrix, util: float
) -> Sizing:
    """The replica shape of `dep` on nodes of `gpus_per_node` x `gpu`: per strategy the smallest layout that
    fits; between strategies, for a sessions target the most sessions per GPU, else the fewer GPUs (TP on a tie)."""
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
    tp_candidates = _tp_candidates(dep, recipe, gpus_per_node) if dep.parallelism != "dp-ep" else []
    if isinstance(tp_candidates, str):
        return Sizing(gpu.id, quant, refusal=tp_candidates)
    if dep.parallelism == "dp-ep" and "dp-ep" not in recipe.parallelism:
        return Sizing(gpu.id, quant, refusal=f"{recipe.id} does not support parallelism dp-ep")
    ctx = contexts(dep, recipe).sizing
    found = []
    reasons = []
    for candidates in (tp_candidates, _dp_ep_candidates(dep, recipe, gpus_per_node)):
        if not candidates:
            continue
        layout, sessions, reason = _first_fitting(candidates, recipe, gpu, quant, dep, ctx, util)
        if layout is None:
            reasons.append(f"{candidates[-1].describe()}: {reason}")
        else:
            found.append((layout, sessions))
    if not found:
        return Sizing(gpu.id, quant, refusal=f"does not fit on {gpu.id}: " + "; ".join(reasons))

    def better(item: tuple[Layout, int]) -> tuple[float, bool]:
        layout, sessions = item
        measure = sessions / layout.gpus if dep.target is not None else -layout.gpus
        return measure, layout.strategy == "tp"

    layout, sessions = max(found, key=better)
    return Sizing(gpu.id, quant, layout, sessions, note=note)


def replica_estimates(
    dep: Deployment, recipe: Recipe, gpu: GpuSpec, layout: Layout, quant: str, util: float
) -> dict[str, CapacityEstimate]:
    """Capacity estimates of one replica at the p50, p95 and target contexts, and loaded (every p50 slot busy)."""
    ctx = contexts(dep, recipe)
    p50 = _estimate(recipe, gpu, layout, quant, dep, ctx.p50, util)
    out = {
        "p50": p50,
        "p95": _estimate(recipe, gpu, layout, quant, dep, ctx.p95, util),
        "loaded": _estimate(recipe, gpu, layout, quant, dep, ctx.p50, util, users=max(1, int(p50.max_concurrency))),
    }
    if ctx.target is not None:
        out["target"] = _estimate(recipe, gpu, layout, quant, dep, ctx.target, util)
    return out
