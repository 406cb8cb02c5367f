"""Capacity with SGLang's memory semantics: its static memory fraction, its KV pool, DP attention.

The KV pool. SGLang sizes its pool from `--mem-fraction-static` (weights + KV pool, per GPU);
`sglang_args.mem_fraction_static` derives that fraction from the site's `gpu_memory_utilization`
so the pool is the capacity model's (utilization x memory - runtime reserve - weights). The
estimate below therefore starts from `capacity.estimate`, whose pool and per-token bytes hold for
both engines; SGLang allocates the pool in pages of one token where vLLM uses 16-token blocks, a
difference of at most 15 tokens per sequence, which the estimate keeps (it errs on the safe side).

DP attention. With `--attn-dp-size D` the TP group of T GPUs runs D attention groups of T / D
ranks, each holding the KV of its own requests only. A token's KV is then copied as many times as
T / D ranks need it (`ModelShape.kv_replication` at T / D), not T: for MLA (one latent shared by all
heads, so every TP rank keeps it) D-way DP attention holds D times the sessions. The FFN / experts
stay tensor- or expert-parallel, so weights and decode bandwidth are the estimate's.
`--max-running-requests` caps the replica's concurrency as vLLM's --max-num-seqs does.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from llm_fabric.engine.capacity.model import CapacityEstimate, default_max_num_seqs, estimate
from llm_fabric.engine.capacity.model_shape import ModelShape
from llm_fabric.engine.recipes import Recipe
from llm_fabric.engine.sglang.command import mem_fraction_static
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuSpec

# far above any KV pool's sessions: the estimate's own figure stays uncapped until the SGLang cap applies
_UNCAPPED = 1 << 30


@dataclass(frozen=True)
class SglangCapacity:
    estimate: CapacityEstimate
    mem_fraction_static: float
    attn_dp_size: int
    kv_copies: int  # copies of each token's KV in a replica (vLLM-style TP: kv_replication at TP)

    def as_dict(self) -> dict[str, object]:
        return self.estimate.as_dict() | {
            "engine": "sglang",
            "mem_fraction_static": self.mem_fraction_static,
            "attn_dp_size": self.attn_dp_size,
            "kv_copies": self.kv_copies,
        }


def sglang_estimate(
    recipe: Recipe,
    gpu: GpuSpec,
    count: int,
    *,
    tensor_parallel_size: int | None = None,
    attn_dp_size: int = 1,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    context_tokens: int | None = None,
    users: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_running_requests: int | None = None,
) -> SglangCapacity:
    base = estimate(
        recipe,
        gpu,
        count,
        tensor_parallel_size=tensor_parallel_size,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        context_tokens=context_tokens,
        users=users,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=_UNCAPPED,
    )
    tp = base.tensor_parallel_size
    if attn_dp_size < 1 or tp % attn_dp_size:
        raise UsageError(f"--attn-dp {attn_dp_size} must divide the tensor-parallel size {tp}")
    fraction = mem_fraction_static(gpu, gpu_memory_utilization)
    shape = ModelShape(recipe.architecture, base.weights_gb, base.quantization, base.kv_cache_dtype)
    copies = shape.kv_replication(tp // attn_dp_size)
    running = max_running_requests or default_max_num_seqs(gpu)
    if not base.fits:
        est = dataclasses.replace(base, max_num_seqs=running)
        return SglangCapacity(est, fraction, attn_dp_size, copies)
    per_replica = base.kv_sessions // base.replicas * shape.kv_replication(tp) // copies
    concurrency = min(per_replica, running) * base.replicas
    est = dataclasses.replace(
        base,
        max_num_seqs=running,
        kv_sessions=per_replica * base.replicas,
        max_concurrency=concurrency,
        replicas_needed=math.ceil(users / min(per_replica, running)),
    )
    return SglangCapacity(est, fraction, attn_dp_size, copies)
