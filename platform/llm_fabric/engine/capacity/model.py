"""The capacity model: does a recipe fit a GPU set, how many sessions does it carry, how fast.

Seed 002's arithmetic, computed: weights from the recipe's quantization, KV bytes per token from
the architecture (GQA or MLA), the KV pool from vLLM's `gpu_memory_utilization`, concurrency in
16-token KV blocks as vLLM allocates them, capped at vLLM's max-num-seqs. Replicas take one of the
strategies of `llm_fabric.engine.capacity.parallelism` (tensor parallel, with pipeline stages across nodes
when one node cannot hold the model; or data-parallel attention with expert parallelism); `auto`
computes each the recipe supports and keeps the one that holds the most sessions (at a latency
target when one is given). Speeds come from `llm_fabric.engine.capacity.speed`: the roofline ceiling and
the calibrated expected figure with its error band. Every assumption is a named constant here or
there and is stated in docs/capacity.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from llm_fabric.engine.capacity.model_shape import GB, ModelShape
from llm_fabric.engine.capacity.parallelism import Layout, ParallelismChoice, Strategy, dp_ep_layout, tp_layout
from llm_fabric.engine.capacity.speed import (
    Speed,
    SpeedConstants,
    fitted_constants,
    prefill_seconds,
    replica_speed,
    step_seconds,
)
from llm_fabric.engine.recipes import QuantizationOption, Recipe
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix

KV_BLOCK_TOKENS = 16  # vLLM's default block size on CUDA
RUNTIME_RESERVE_GB_PER_GPU = 4.0  # activation peak of the profiling run, CUDA graphs, NCCL buffers
PREFILL_EFFICIENCY = 0.5  # achieved / peak tensor throughput during prefill (seed 002: "3 s ideal, 6-7 in practice")
DEFAULT_CONTEXT_TOKENS = 8192
DEFAULT_OUTPUT_TOKENS = 1024  # traffic when only --context is given: a 1K-token answer to a context-long prompt
# vLLM's default --max-num-seqs for `vllm serve` (EngineArgs.get_batch_defaults, vLLM 0.32): 1024 on a
# GPU of 70 GiB or more whose name does not say A100, else 256. The fabric passes it explicitly, so an
# engine upgrade cannot change how many sequences a replica runs at once behind the plan's back.
# Under data-parallel attention every DP rank is an engine core with its own scheduler and limit.
MAX_NUM_SEQS_LARGE_GPU = 1024
MAX_NUM_SEQS_OTHER_GPU = 256
LARGE_GPU_MIB = 70 * 1024
Users = int | Literal["max"]


@dataclass(frozen=True)
class LatencyTarget:
    itl_ms: float | None = None
    ttft_ms: float | None = None

    def __bool__(self) -> bool:
        return self.itl_ms is not None or self.ttft_ms is not None

    def met_by(self, speed: Speed) -> bool:
        return (self.itl_ms is None or speed.itl_ms <= self.itl_ms) and (
            self.ttft_ms is None or speed.ttft_ms <= self.ttft_ms
        )

    def describe(self) -> str:
        parts = [
            f"ITL <= {self.itl_ms:g} ms" if self.itl_ms is not None else "",
            f"TTFT <= {self.ttft_ms:g} ms" if self.ttft_ms is not None else "",
        ]
        return " and ".join(p for p in parts if p)


@dataclass(frozen=True)
class StrategySummary:
    """What one strategy gives on the GPUs asked for (capacity computes each; auto keeps one)."""

    strategy: str
    layout: str
    fits: bool
    max_concurrency: int
    replicas_needed: int
    expected_output_tokens_per_s_total: float
    reason: str | None


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
    decode_tokens_per_s_single: float  # ceiling: decode alone, one stream at the context
    decode_tokens_per_s_per_user: float  # ceiling: decode alone, `users` streams (at most max_concurrency)
    decode_tokens_per_s_total: float  # ceiling
    prefill_seconds: float  # one context-long prompt at seed 002's 50% of peak
    fits: bool
    reason: str | None
    kernel: str
    strategy: Strategy = "tp"
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    expert_parallel: bool = False
    replica_gpus: int = 1
    nodes: int = 1
    gpus_per_node: int = 8
    input_tokens: int = 0
    output_tokens: int = 0
    ceiling: Speed | None = None
    expected: Speed | None = None
    latency_target: LatencyTarget = field(default_factory=LatencyTarget)
    concurrency_at_target: int | None = None  # per replica: the most sessions whose expected speed meets the target
    replicas_at_target: int | None = None  # replicas for `users` at the target
    target_reason: str | None = None
    strategies: tuple[StrategySummary, ...] = ()
    users_max: bool = False

    @property
    def layout(self) -> Layout:
        return Layout(
            self.strategy,
            self.tensor_parallel_size,
            self.pipeline_parallel_size,
            self.data_parallel_size,
            self.gpus_per_node,
        )

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["ceiling"] = self.ceiling.as_dict() if self.ceiling else None
        data["expected"] = self.expected.as_dict() if self.expected else None
        data["latency_target"] = {"itl_ms": self.latency_target.itl_ms, "ttft_ms": self.latency_target.ttft_ms}
        data["layout"] = self.layout.describe()
        return data


def default_max_num_seqs(gpu: GpuSpec) -> int:
    """The `--max-num-seqs` vLLM would choose on its own for `gpu` (see MAX_NUM_SEQS_LARGE_GPU)."""
    large = gpu.memory_mib >= LARGE_GPU_MIB and not any("a100" in name.lower() for name in gpu.product_names)
    return MAX_NUM_SEQS_LARGE_GPU if large else MAX_NUM_SEQS_OTHER_GPU


def shape_of(recipe: Recipe, option: QuantizationOption, quantization: str, kv_cache_dtype: str = "auto") -> ModelShape:
    return ModelShape(recipe.architecture, option.weights_gb, quantization, kv_cache_dtype)


def kv_bytes_per_token(recipe: Recipe, kv_cache_dtype: str = "auto") -> int:
    """Bytes of KV cache one token adds, whole model (GQA: 2*L*H_kv*d*b; MLA: L*(r + d_rope)*b)."""
    return ModelShape(recipe.architecture, 1.0, recipe.default_quantization, kv_cache_dtype).kv_bytes_per_token()


@dataclass(frozen=True)
class ReplicaMemory:
    """One replica's memory at one context: the KV pool, the bytes a sequence takes, the sessions."""

    usable: float  # bytes for weights + KV, whole replica
    pool: float  # KV pool, whole replica
    seq_bytes: float
    sessions: int
    max_num_seqs: int  # sequences the replica's engine cores run at once
    refusal: str | None


def replica_memory(
    shape: ModelShape, gpu: GpuSpec, layout: Layout, context: int, utilization: float, reserve: float, max_num_seqs: int
) -> ReplicaMemory:
    per_gpu = utilization * gpu.memory_bytes - reserve * GB
    blocks = math.ceil(context / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    kv_token = shape.kv_bytes_per_token()
    fixed = shape.fixed_bytes_per_sequence()
    where = f"{layout.gpus} x {gpu.id}"
    if layout.strategy == "dp-ep":
        ranks = layout.data_parallel_size
        weights_gpu = shape.shared_bytes + shape.routed_bytes / ranks
        seq_bytes = blocks * kv_token + fixed  # each rank keeps its own sequences' latent, once
        pool_gpu = max(0.0, per_gpu - weights_gpu)
        sessions = int(pool_gpu // seq_bytes) * ranks
        refusal = None
        if weights_gpu > per_gpu:
            refusal = (
                f"weights {weights_gpu / GB:.1f} GB per GPU (shared part on every rank, 1/{ranks} of the "
                f"experts) exceed the {per_gpu / GB:.1f} GB usable per {gpu.id}"
            )
        return ReplicaMemory(per_gpu * ranks, pool_gpu * ranks, seq_bytes, sessions, max_num_seqs * ranks, refusal)
    usable = layout.gpus * per_gpu
    pool = max(0.0, usable - shape.weights_gb * GB)
    seq_bytes = blocks * kv_token * shape.kv_replication(layout.tensor_parallel_size) + fixed
    refusal = None
    if shape.weights_gb * GB > usable:
        refusal = (
            f"weights {shape.weights_gb:g} GB exceed the {usable / GB:.1f} GB usable on {where} "
            f"({utilization:g} x {gpu.memory_gb:g} GB - {reserve:g} GB reserve per GPU)"
        )
    return ReplicaMemory(usable, pool, seq_bytes, int(pool // seq_bytes), max_num_seqs, refusal)


def estimate(
    recipe: Recipe,
    gpu: GpuSpec,
    count: int,
    *,
    tensor_parallel_size: int | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    context_tokens: int | None = None,
    users: Users = 1,
    gpu_memory_utilization: float = 0.9,
    runtime_reserve_gb: float = RUNTIME_RESERVE_GB_PER_GPU,
    max_num_seqs: int | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    parallelism: ParallelismChoice = "auto",
    gpus_per_node: int | None = None,
    latency_target: LatencyTarget | None = None,
    constants: SpeedConstants | None = None,
    layout: Layout | None = None,
) -> CapacityEstimate:
    """Capacity of `count` GPUs of one model serving `recipe` in replicas of one layout.

    The context a session holds is `context_tokens` (default: input + output tokens when given, else
    DEFAULT_CONTEXT_TOKENS); the speeds are for requests of `input_tokens` in and `output_tokens` out
    (defaults: the context in, DEFAULT_OUTPUT_TOKENS out). A replica runs at most `max_num_seqs`
    sequences per engine core (default: default_max_num_seqs(gpu)), however many more its KV pool
    could hold: `max_concurrency` is the smaller of the two. `users="max"` answers for as many
    sessions as the replicas admit. Replicas stay inside a node of `gpus_per_node` GPUs (default:
    the catalog's) unless the model fits no single node. `layout` evaluates exactly that replica shape
    (the planner's sizing), without choosing.
    """
    if context_tokens is None:
        context_tokens = (input_tokens or 0) + (output_tokens or 0) or DEFAULT_CONTEXT_TOKENS
    isl = input_tokens if input_tokens is not None else context_tokens
    osl = output_tokens if output_tokens is not None else DEFAULT_OUTPUT_TOKENS
    _check_inputs(count, context_tokens, users, gpu_memory_utilization, max_num_seqs, isl, osl, gpus_per_node)
    quant, option = recipe.quantization(quantization)
    shape = shape_of(recipe, option, quant, kv_cache_dtype or "auto")
    shape.kv_bytes_per_token()  # an unknown KV dtype is a usage error before anything else
    node = gpus_per_node or gpu.gpus_per_node
    target = latency_target or LatencyTarget()
    job = _Job(
        recipe,
        gpu,
        count,
        quant,
        option,
        shape,
        context_tokens,
        users,
        gpu_memory_utilization,
        runtime_reserve_gb,
        max_num_seqs or default_max_num_seqs(gpu),
        isl,
        osl,
        node,
        target,
        constants or fitted_constants(),
    )
    if layout is not None:
        return job.evaluate(layout)
    strategies = _strategies(recipe, parallelism, tensor_parallel_size)
    results = [job.best(strategy, tensor_parallel_size) for strategy in strategies]
    chosen = max(results, key=_preference)
    summaries = tuple(_summary(r) for r in results)
    return replace(chosen, strategies=summaries) if len(results) > 1 else chosen


def _preference(est: CapacityEstimate) -> tuple[object, ...]:
    """How `auto` ranks strategies: fits; meets the latency target; then, for `--users max`, the most
    expected output tokens per second; else the fewest GPUs for the users (replicas at the target when
    one is given) and, among those, the fastest expected stream; finally TP (the simpler engine)."""
    met = est.replicas_at_target is not None or not est.latency_target
    if est.users_max:
        speed = est.expected.output_tokens_per_s_total if est.expected else 0.0
        return est.fits, met, 0, round(speed), est.strategy == "tp"
    replicas = est.replicas_at_target if est.replicas_at_target is not None else est.replicas_needed
    per_user = est.expected.output_tokens_per_s_per_user if est.expected else 0.0
    return est.fits, met, -replicas * est.replica_gpus, round(per_user, 1), est.strategy == "tp"


def _sessions_first(est: CapacityEstimate) -> tuple[bool, int, int]:
    """Within one strategy: the layout holding the most sessions (at the target), the smaller on a tie."""
    met = est.replicas_at_target is not None or not est.latency_target
    sessions = (
        est.concurrency_at_target * est.replicas if est.concurrency_at_target is not None else (est.max_concurrency)
    )
    return met, sessions, -est.replica_gpus


def _summary(est: CapacityEstimate) -> StrategySummary:
    total = est.expected.output_tokens_per_s_total if est.expected else 0.0
    return StrategySummary(
        est.strategy,
        est.layout.describe(),
        est.fits,
        est.max_concurrency,
        est.replicas_needed,
        round(total, 1),
        est.reason,
    )


def _strategies(recipe: Recipe, parallelism: ParallelismChoice, tp: int | None) -> list[Strategy]:
    if parallelism not in ("tp", "dp-ep", "auto"):
        raise UsageError(f"unknown parallelism `{parallelism}`", hint="use tp, dp-ep or auto")
    if parallelism == "dp-ep" and tp is not None and tp > 1:
        raise UsageError(
            f"--tp {tp} and --parallelism dp-ep exclude each other",
            hint="data-parallel attention runs one GPU per rank (TP 1); leave out --tp",
        )
    if parallelism != "auto":
        if parallelism not in recipe.parallelism:
            raise UsageError(
                f"{recipe.id} does not support parallelism `{parallelism}`",
                hint=f"{recipe.id} supports: {', '.join(recipe.parallelism)}",
            )
        return [parallelism]
    if tp is not None:
        return ["tp"]
    return list(recipe.parallelism)


def _check_inputs(
    count: int,
    context_tokens: int,
    users: Users,
    utilization: float,
    max_num_seqs: int | None,
    input_tokens: int,
    output_tokens: int,
    gpus_per_node: int | None,
) -> None:
    if count < 1:
        raise UsageError(f"--count must be at least 1 (got {count})")
    if context_tokens < 1:
        raise UsageError(f"--context must be at least 1 token (got {context_tokens})")
    if users != "max" and (not isinstance(users, int) or users < 1):
        raise UsageError(f"--users must be a number of at least 1 or `max` (got {users})")
    if not 0.0 < utilization <= 1.0:
        raise UsageError(f"--gpu-memory-utilization must be in (0, 1] (got {utilization})")
    if max_num_seqs is not None and max_num_seqs < 1:
        raise UsageError(f"--max-num-seqs must be at least 1 (got {max_num_seqs})")
    if input_tokens < 0 or output_tokens < 1:
        raise UsageError(
            f"--input-tokens must be at least 0 and --output-tokens at least 1 (got {input_tokens} and {output_tokens})"
        )
    if gpus_per_node is not None and gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be at least 1 (got {gpus_per_node})")


@dataclass(frozen=True)
class _Job:
    recipe: Recipe
    gpu: GpuSpec
    count: int
    quant: str
    option: QuantizationOption
    shape: ModelShape
    context: int
    users: Users
    utilization: float
    reserve: float
    max_num_seqs: int
    isl: int
    osl: int
    gpus_per_node: int
    target: LatencyTarget
    consts: SpeedConstants

    def layouts(self, strategy: Strategy, tp: int | None) -> tuple[list[Layout], list[Layout]]:
        """(single-node layouts, multi-node layouts) of a strategy on these GPUs."""
        node = min(self.gpus_per_node, self.count)
        nodes = self.count // self.gpus_per_node
        if strategy == "dp-ep":
            single = [dp_ep_layout(d, self.gpus_per_node) for d in _powers_of_two(2, node)]
            multi = [dp_ep_layout(n * self.gpus_per_node, self.gpus_per_node) for n in range(2, nodes + 1)]
            return single, multi
        if tp is not None:
            if tp > self.gpus_per_node:
                raise UsageError(
                    f"--tp {tp} is more than the {self.gpus_per_node} GPUs of one {self.gpu.id} node: a "
                    "tensor-parallel group stays inside a node",
                    hint="larger replicas run one pipeline stage per node (leave out --tp), or set --gpus-per-node",
                )
            if tp > self.count:
                raise UsageError(
                    f"--tp {tp} needs between 1 and --count ({self.count}) GPUs", hint="a replica takes TP GPUs"
                )
            sizes = [tp]
        else:
            sizes = sorted(t for t in self.recipe.tensor_parallel_sizes if t <= node)
            if not sizes:
                raise UsageError(
                    f"{self.count} GPUs are fewer than the smallest tensor-parallel size of {self.recipe.id} "
                    f"({min(self.recipe.tensor_parallel_sizes)})",
                    hint="add GPUs or pick a recipe that runs at a smaller TP",
                )
        single = [tp_layout(t, self.gpus_per_node) for t in sizes]
        widest = max(sizes)
        multi = (
            [tp_layout(widest, self.gpus_per_node, n) for n in range(2, nodes + 1)]
            if (widest == self.gpus_per_node)
            else []
        )
        return single, multi

    def best(self, strategy: Strategy, tp: int | None) -> CapacityEstimate:
        """The layout of `strategy` that holds the most sessions, on one node when any fits one node.

        Taking the best keeps the model monotone: more GPUs never hold fewer sessions, a longer context
        never holds more. When nothing fits, the largest layout is returned so the reason shows.
        """
        single, multi = self.layouts(strategy, tp)
        candidates = [self.evaluate(layout) for layout in single]
        if not any(c.fits for c in candidates) and multi:
            candidates += [self.evaluate(layout) for layout in multi]
        if not candidates:
            return self.evaluate(dp_ep_layout(max(1, min(self.count, self.gpus_per_node)), self.gpus_per_node))
        fitting = [c for c in candidates if c.fits]
        if not fitting:
            return candidates[-1]
        return max(fitting, key=_sessions_first)

    def evaluate(self, layout: Layout) -> CapacityEstimate:
        gpu, shape = self.gpu, self.shape
        replicas = self.count // layout.gpus
        memory = replica_memory(shape, gpu, layout, self.context, self.utilization, self.reserve, self.max_num_seqs)
        reason, kernel = _refusal(self.recipe, gpu, layout, self.quant, self.option, shape.kv_cache_dtype, self.context)
        if reason is None and replicas < 1:
            reason = f"{layout.describe()} needs {layout.gpus} GPUs, {self.count} given"
        if reason is None:
            reason = memory.refusal
        if reason is None and memory.sessions < 1:
            reason = (
                f"KV pool of {memory.pool / GB:.1f} GB per replica cannot hold one {self.context}-token "
                f"sequence ({memory.seq_bytes / GB:.2f} GB)"
            )
        fits = reason is None
        per_replica = min(memory.sessions, memory.max_num_seqs) if fits else 0
        total_sessions = per_replica * max(replicas, 0)
        users = total_sessions if self.users == "max" else self.users
        active = min(users, total_sessions)
        batch = math.ceil(active / replicas) if active else 0
        # the decode-only ceiling at the context (no prefill): the figures `fabric capacity` always showed
        single = 1.0 / step_seconds(shape, gpu, layout, 1, self.context, None) if fits else 0.0
        per_user = 1.0 / step_seconds(shape, gpu, layout, batch, self.context, None) if batch else 0.0
        ceiling = self.speed(layout, batch, replicas, None)
        expected = self.speed(layout, batch, replicas, self.consts)
        at_target, replicas_target, target_reason = (
            self.at_target(layout, per_replica, users) if fits else (None, None, None)
        )
        seed_prefill = prefill_seconds(shape, gpu, layout, self.context, None) / PREFILL_EFFICIENCY
        return CapacityEstimate(
            recipe=self.recipe.id,
            gpu=gpu.id,
            count=self.count,
            tensor_parallel_size=layout.tensor_parallel_size,
            replicas=max(replicas, 0),
            quantization=self.quant,
            kv_cache_dtype=shape.kv_cache_dtype,
            context_tokens=self.context,
            users=users,
            gpu_memory_utilization=self.utilization,
            weights_gb=self.option.weights_gb,
            kv_bytes_per_token=shape.kv_bytes_per_token(),
            kv_pool_gb=round(memory.pool * replicas / GB, 2) if fits else 0.0,
            max_num_seqs=self.max_num_seqs,
            kv_sessions=memory.sessions * replicas if fits else 0,
            max_concurrency=total_sessions,
            replicas_needed=math.ceil(users / per_replica) if fits else 0,
            decode_tokens_per_s_single=round(single, 1),
            decode_tokens_per_s_per_user=round(per_user, 1),
            decode_tokens_per_s_total=round(per_user * active, 1),
            prefill_seconds=round(seed_prefill, 3),
            fits=fits,
            reason=reason,
            kernel=kernel,
            strategy=layout.strategy,
            pipeline_parallel_size=layout.pipeline_parallel_size,
            data_parallel_size=layout.data_parallel_size,
            expert_parallel=layout.expert_parallel,
            replica_gpus=layout.gpus,
            nodes=layout.nodes,
            gpus_per_node=layout.gpus_per_node,
            input_tokens=self.isl,
            output_tokens=self.osl,
            ceiling=ceiling,
            expected=expected,
            latency_target=self.target,
            concurrency_at_target=at_target,
            replicas_at_target=replicas_target,
            target_reason=target_reason,
            users_max=self.users == "max",
        )

    def speed(self, layout: Layout, batch: int, replicas: int, consts: SpeedConstants | None) -> Speed:
        """Speed at this job's traffic: the ceiling (`consts=None`) or the expected figure."""
        return replica_speed(
            self.shape,
            self.gpu,
            layout,
            input_tokens=self.isl,
            output_tokens=self.osl,
            batch=batch,
            replicas=replicas,
            consts=consts,
        )

    def at_target(self, layout: Layout, per_replica: int, users: int) -> tuple[int | None, int | None, str | None]:
        """The most sessions a replica runs at the latency target (expected speed), and the replicas for users."""
        if not self.target:
            return None, None, None

        if not self.target.met_by(self.speed(layout, 1, 1, self.consts)):
            one = self.speed(layout, 1, 1, self.consts)
            why = (
                f"even one session misses {self.target.describe()} (expected ITL {one.itl_ms:.1f} ms, "
                f"TTFT {one.ttft_ms:.0f} ms on {layout.describe()})"
            )
            return None, None, why
        low, high = 1, per_replica  # expected ITL and TTFT grow with the batch: bisect the largest that meets
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if self.target.met_by(self.speed(layout, mid, 1, self.consts)) else (low, mid - 1)
        return low, math.ceil(users / low), None


def _powers_of_two(low: int, high: int) -> list[int]:
    out, n = [], low
    while n <= high:
        out.append(n)
        n *= 2
    return out


def _refusal(
    recipe: Recipe, gpu: GpuSpec, layout: Layout, quant: str, option: QuantizationOption, kv_dtype: str, context: int
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
    tp = layout.tensor_parallel_size
    if layout.strategy == "tp" and tp not in recipe.tensor_parallel_sizes:
        return f"{recipe.id} cannot run at TP {tp} (allowed: {recipe.tensor_parallel_sizes})", kernel
    experts = recipe.architecture.experts
    if layout.strategy == "dp-ep" and experts is not None and experts.routed % layout.data_parallel_size:
        return (
            f"{experts.routed} routed experts do not split evenly over {layout.data_parallel_size} "
            "expert-parallel ranks"
        ), kernel
    if context > recipe.architecture.max_context:
        return f"context {context} exceeds the model's {recipe.architecture.max_context} tokens", kernel
    return None, kernel
