"""The capacity model: does a recipe fit a GPU set, how many sessions does it carry, how fast.

Seed 002's arithmetic, computed: weights from the recipe's quantization, KV bytes per token from
the architecture (GQA or MLA), the KV pool from vLLM's `gpu_memory_utilization`, concurrency in
16-token KV blocks as vLLM allocates them, decode as a memory-bandwidth ceiling and prefill as a
compute-bound estimate. Every assumption is a named constant here and is stated in docs/capacity.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from llm_fabric.engine.recipes import KV_DTYPE_BYTES, MlaAttention, QuantizationOption, Recipe
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix

GB = 1e9
KV_BLOCK_TOKENS = 16  # vLLM's default block size on CUDA
RUNTIME_RESERVE_GB_PER_GPU = 4.0  # activation peak of the profiling run, CUDA graphs, NCCL buffers
PREFILL_EFFICIENCY = 0.5  # achieved / peak tensor throughput during prefill (seed 002: "3 s ideal, 6-7 in practice")
INDEXER_SCALE_BYTES = 4  # DSA indexer keys are fp8 with one fp32 scale per token and layer
DEFAULT_CONTEXT_TOKENS = 8192
LOW_PRECISION_COMPUTE = frozenset({"fp8", "nvfp4", "mxfp4"})
# vLLM's default --max-num-seqs for `vllm serve` (EngineArgs.get_batch_defaults, vLLM 0.32): 1024 on a
# GPU of 70 GiB or more whose name does not say A100, else 256. The fabric passes it explicitly, so an
# engine upgrade cannot change how many sequences a replica runs at once behind the plan's back.
MAX_NUM_SEQS_LARGE_GPU = 1024
MAX_NUM_SEQS_OTHER_GPU = 256
LARGE_GPU_MIB = 70 * 1024


@dataclass(frozen=True)
class CapacityEstimate:
    recipe: str
    gpu: str
    count: int
    tensor_parallel_size: int
    replicas: int
    quantization: str
    kv_cache_dtype: str
    context_tokens: int
    users: int
    gpu_memory_utilization: float
    weights_gb: float
    kv_bytes_per_token: int
    kv_pool_gb: float
    max_num_seqs: int
    kv_sessions: int
    max_concurrency: int
    replicas_needed: int
    decode_tokens_per_s_single: float
    decode_tokens_per_s_per_user: float
    decode_tokens_per_s_total: float
    prefill_seconds: float
    fits: bool
    reason: str | None
    kernel: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def default_max_num_seqs(gpu: GpuSpec) -> int:
    """The `--max-num-seqs` vLLM would choose on its own for `gpu` (see MAX_NUM_SEQS_LARGE_GPU)."""
    large = gpu.memory_mib >= LARGE_GPU_MIB and not any("a100" in name.lower() for name in gpu.product_names)
    return MAX_NUM_SEQS_LARGE_GPU if large else MAX_NUM_SEQS_OTHER_GPU


def kv_bytes_per_token(recipe: Recipe, kv_cache_dtype: str = "auto") -> int:
    """Bytes of KV cache one token adds, whole model (GQA: 2*L*H_kv*d*b; MLA: L*(r + d_rope)*b)."""
    arch = recipe.architecture
    dtype_bytes = _kv_dtype_bytes(kv_cache_dtype)
    att = arch.attention
    if isinstance(att, MlaAttention):
        per_layer = (att.kv_lora_rank + att.qk_rope_head_dim) * dtype_bytes
        if att.indexer_head_dim is not None:
            per_layer += att.indexer_head_dim + INDEXER_SCALE_BYTES
        return arch.full_kv_layers * per_layer
    return 2 * arch.full_kv_layers * att.kv_heads * att.head_dim * dtype_bytes


def _kv_dtype_bytes(kv_cache_dtype: str) -> int:
    try:
        return KV_DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        known = ", ".join(KV_DTYPE_BYTES)
        raise UsageError(f"unknown KV-cache dtype `{kv_cache_dtype}`", hint=f"use one of {known}") from None


def kv_replication(recipe: Recipe, tensor_parallel_size: int) -> int:
    """How many copies of each token's KV a tensor-parallel group holds.

    vLLM shards GQA KV heads across ranks but replicates a head when ranks outnumber heads; an MLA
    latent is shared by all heads, so every rank keeps the whole latent.
    """
    att = recipe.architecture.attention
    if isinstance(att, MlaAttention):
        return tensor_parallel_size
    return max(1, tensor_parallel_size // att.kv_heads) if tensor_parallel_size > att.kv_heads else 1


def fixed_bytes_per_sequence(recipe: Recipe, kv_cache_dtype: str = "auto") -> int:
    """Cache a sequence holds whatever its length: sliding-window layers and recurrent state."""
    arch = recipe.architecture
    total = 0
    if arch.sliding_window is not None and not isinstance(arch.attention, MlaAttention):
        att = arch.attention
        total += (
            2
            * arch.sliding_window.layers
            * att.kv_heads
            * att.head_dim
            * _kv_dtype_bytes(kv_cache_dtype)
            * (arch.sliding_window.window)
        )
    if arch.linear_attention is not None:
        la = arch.linear_attention
        total += la.layers * la.value_heads * la.key_head_dim * la.value_head_dim * la.state_dtype_bytes
    return total


def _bytes_per_param(recipe: Recipe, option: QuantizationOption) -> float:
    return option.weights_gb * GB / (recipe.total_params_b * 1e9)


def weights_read_per_step(recipe: Recipe, option: QuantizationOption, batch: int) -> float:
    """Weight bytes a decode step reads for `batch` sequences.

    A dense model reads everything. A MoE reads its shared part plus the experts the batch routes
    to: with E experts, k per token and b tokens, E * (1 - (1 - k/E)^b) distinct experts in expectation.
    """
    arch = recipe.architecture
    per_param = _bytes_per_param(recipe, option)
    experts = arch.experts
    if experts is None or experts.routed == experts.active:
        return arch.total_params_b * 1e9 * per_param
    per_expert_b = (arch.total_params_b - arch.active_params_b) / (experts.routed - experts.active)
    shared_b = arch.active_params_b - experts.active * per_expert_b
    touched = experts.routed * (1.0 - (1.0 - experts.active / experts.routed) ** max(1, batch))
    return (shared_b + per_expert_b * touched) * 1e9 * per_param


def prefill_flops(recipe: Recipe, tokens: int) -> float:
    """2 * active params * tokens, plus causal attention 2 * layers * tokens^2 * hidden (seed 002)."""
    arch = recipe.architecture
    flops = 2.0 * arch.active_params_b * 1e9 * tokens
    flops += 2.0 * arch.full_kv_layers * tokens * tokens * arch.hidden_size
    if arch.sliding_window is not None:
        flops += 2.0 * arch.sliding_window.layers * tokens * min(tokens, arch.sliding_window.window) * arch.hidden_size
    return flops


def estimate(
    recipe: Recipe,
    gpu: GpuSpec,
    count: int,
    *,
    tensor_parallel_size: int | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    users: int = 1,
    gpu_memory_utilization: float = 0.9,
    runtime_reserve_gb: float = RUNTIME_RESERVE_GB_PER_GPU,
    max_num_seqs: int | None = None,
) -> CapacityEstimate:
    """Capacity of `count` GPUs of one model serving `recipe` (replicas of `tensor_parallel_size` GPUs).

    A replica runs at most `max_num_seqs` sequences at once (default: default_max_num_seqs(gpu)),
    however many more its KV pool could hold: `max_concurrency` is the smaller of the two.
    """
    _check_inputs(count, context_tokens, users, gpu_memory_utilization, max_num_seqs)
    quant, option = recipe.quantization(quantization)
    kv_dtype = kv_cache_dtype or "auto"
    seqs = max_num_seqs or default_max_num_seqs(gpu)
    if tensor_parallel_size is None:
        tensor_parallel_size = _default_tp(
            recipe, gpu, count, quant, kv_dtype, context_tokens, gpu_memory_utilization, runtime_reserve_gb, seqs
        )
    return _estimate(
        recipe,
        gpu,
        count,
        tensor_parallel_size,
        quant,
        option,
        kv_dtype,
        context_tokens,
        users,
        gpu_memory_utilization,
        runtime_reserve_gb,
        seqs,
    )


def _check_inputs(count: int, context_tokens: int, users: int, utilization: float, max_num_seqs: int | None) -> None:
    if count < 1:
        raise UsageError(f"--count must be at least 1 (got {count})")
    if context_tokens < 1:
        raise UsageError(f"--context must be at least 1 token (got {context_tokens})")
    if users < 1:
        raise UsageError(f"--users must be at least 1 (got {users})")
    if not 0.0 < utilization <= 1.0:
        raise UsageError(f"--gpu-memory-utilization must be in (0, 1] (got {utilization})")
    if max_num_seqs is not None and max_num_seqs < 1:
        raise UsageError(f"--max-num-seqs must be at least 1 (got {max_num_seqs})")


def _default_tp(
    recipe: Recipe,
    gpu: GpuSpec,
    count: int,
    quant: str,
    kv_dtype: str,
    context: int,
    utilization: float,
    reserve: float,
    max_num_seqs: int,
) -> int:
    """The allowed TP (at most `count`) that holds the most sessions at `context`; the smaller on a tie.

    Taking the best TP keeps the model monotone: more GPUs never hold fewer sessions, a longer
    context never holds more. When nothing fits, the largest TP is returned so the reason shows.
    """
    candidates = [tp for tp in sorted(recipe.tensor_parallel_sizes) if tp <= count]
    if not candidates:
        raise UsageError(
            f"{count} GPUs are fewer than the smallest tensor-parallel size of {recipe.id} "
            f"({min(recipe.tensor_parallel_sizes)})",
            hint="add GPUs or pick a recipe that runs at a smaller TP",
        )
    option = recipe.quantizations[quant]  # type: ignore[index]
    best, best_sessions = candidates[-1], 0
    for tp in candidates:
        est = _estimate(recipe, gpu, count, tp, quant, option, kv_dtype, context, 1, utilization, reserve, max_num_seqs)
        if est.fits and est.max_concurrency > best_sessions:
            best, best_sessions = tp, est.max_concurrency
    return best


def _refusal(
    recipe: Recipe, gpu: GpuSpec, tp: int, quant: str, option: QuantizationOption, kv_dtype: str, context: int
) -> tuple[str | None, str]:
    """Why this combination cannot run at all (kernel, KV dtype, TP, context), and the kernel used."""
    matrix = load_kernel_matrix()
    runs, kernel = matrix.runs(gpu.architecture, quant, allow_weight_only=option.weight_only_fallback)
    if not runs:
        return kernel, kernel
    if kv_dtype not in recipe.kv_cache_dtypes:
        return f"recipe {recipe.id} does not offer KV-cache dtype {kv_dtype}", kernel
    if kv_dtype not in matrix.for_architecture(gpu.architecture).kv_cache_dtypes:
        return f"KV-cache dtype {kv_dtype} has no kernel on {gpu.architecture}", kernel
    if tp not in recipe.tensor_parallel_sizes:
        return f"{recipe.id} cannot run at TP {tp} (allowed: {recipe.tensor_parallel_sizes})", kernel
    if context > recipe.architecture.max_context:
        return f"context {context} exceeds the model's {recipe.architecture.max_context} tokens", kernel
    return None, kernel


def _estimate(
    recipe: Recipe,
    gpu: GpuSpec,
    count: int,
    tp: int,
    quant: str,
    option: QuantizationOption,
    kv_dtype: str,
    context: int,
    users: int,
    utilization: float,
    reserve: float,
    max_num_seqs: int,
) -> CapacityEstimate:
    if tp < 1 or tp > count:
        raise UsageError(f"--tp {tp} needs between 1 and --count ({count}) GPUs", hint="a replica takes TP GPUs")
    replicas = count // tp
    kv_token = kv_bytes_per_token(recipe, kv_dtype)
    refusal, kernel = _refusal(recipe, gpu, tp, quant, option, kv_dtype, context)
    usable = tp * (utilization * gpu.memory_bytes - reserve * GB)
    pool_replica = max(0.0, usable - option.weights_gb * GB)
    seq_bytes = math.ceil(context / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS * kv_token * kv_replication(recipe, tp)
    seq_bytes += fixed_bytes_per_sequence(recipe, kv_dtype)
    kv_replica = int(pool_replica // seq_bytes)
    per_replica = min(kv_replica, max_num_seqs)
    reason = refusal
    if reason is None and option.weights_gb * GB > usable:
        reason = (
            f"weights {option.weights_gb:g} GB exceed the {usable / GB:.1f} GB usable on {tp} x {gpu.id} "
            f"({utilization:g} x {gpu.memory_gb:g} GB - {reserve:g} GB reserve per GPU)"
        )
    elif reason is None and kv_replica < 1:
        reason = (
            f"KV pool of {pool_replica / GB:.1f} GB per replica cannot hold one {context}-token sequence "
            f"({seq_bytes / GB:.2f} GB)"
        )
    fits = reason is None
    bandwidth = tp * gpu.memory_bandwidth_tbs * 1e12
    kv_read = context * kv_token  # each replica reads one copy of a sequence's KV per step, spread over ranks
    single = bandwidth / (weights_read_per_step(recipe, option, 1) + kv_read)
    active = min(users, per_replica * replicas) if fits else 0
    batch = math.ceil(active / replicas) if active else 0
    per_user = bandwidth / (weights_read_per_step(recipe, option, batch) + batch * kv_read) if batch else 0.0
    compute: Literal["bf16", "fp8"] = "fp8" if quant in LOW_PRECISION_COMPUTE else "bf16"
    prefill = prefill_flops(recipe, context) / (tp * gpu.peak_tflops(compute) * 1e12 * PREFILL_EFFICIENCY)
    return CapacityEstimate(
        recipe=recipe.id,
        gpu=gpu.id,
        count=count,
        tensor_parallel_size=tp,
        replicas=replicas,
        quantization=quant,
        kv_cache_dtype=kv_dtype,
        context_tokens=context,
        users=users,
        gpu_memory_utilization=utilization,
        weights_gb=option.weights_gb,
        kv_bytes_per_token=kv_token,
        kv_pool_gb=round(pool_replica * replicas / GB, 2) if fits else 0.0,
        max_num_seqs=max_num_seqs,
        kv_sessions=kv_replica * replicas if fits else 0,
        max_concurrency=per_replica * replicas if fits else 0,
        replicas_needed=math.ceil(users / per_replica) if fits else 0,
        decode_tokens_per_s_single=round(single, 1) if fits else 0.0,
        decode_tokens_per_s_per_user=round(per_user, 1),
        decode_tokens_per_s_total=round(per_user * active, 1),
        prefill_seconds=round(prefill, 3),
        fits=fits,
        reason=reason,
        kernel=kernel,
    )
