"""`python -m sglang.launch_server` arguments and environment for a recipe on a GPU model (SGLang 0.5.23).

The counterpart of `llm_fabric.engine.vllm.command` (vLLM), built from the same `engine.command.ServingArgs`.
Every flag name below is SGLang's own, as its
`ServerArgs` declares it in the pinned wheel (`sglang/srt/arg_groups/fields/`); the generated
commands are checked by that parser (`llm_fabric.engine.sglang.check`). What differs from vLLM:

- memory: `--mem-fraction-static` is the share of GPU memory for weights plus the KV pool only;
  activations and CUDA graphs live in the rest. vLLM's `--gpu-memory-utilization` is the engine's
  whole budget, activations included. `mem_fraction_static` derives SGLang's value so that the KV
  pool is the one the capacity model plans with (utilization minus the runtime reserve).
- concurrency: `--max-running-requests` caps the batch like vLLM's `--max-num-seqs` (same default,
  `capacity.default_max_num_seqs`), and `--max-queued-requests` bounds the queue (SGLang rejects
  beyond it instead of letting users wait for minutes, seed 000).
- priority: SGLang serves HIGHER priority values first unless `--schedule-low-priority-values-first`;
  the fabric always passes it, so one priority number means the same on both engines (lower first,
  vLLM's polarity). `llm_fabric.engine.request_hooks` gives the gateway the numbers.
- generation defaults: SGLang has no server-side override like vLLM's `--override-generation-config`
  (`--preferred-sampling-params` is only reported by /get_model_info), so the output cap and the
  sampling defaults are all request defaults the gateway injects.
- loop guard: a custom logit processor sent with each request (`--enable-custom-logit-processor`),
  configured by the same `FABRIC_LOOP_GUARD_*` environment (`llm_fabric.engine.runtime.sglang_loop_guard`).
- metrics: `--enable-metrics` (sglang:* series on /metrics of the same port) and
  `--enable-cache-report` (without it the usage of a response carries no cached tokens).
"""

from __future__ import annotations

import math

from llm_fabric.engine.capacity.model import RUNTIME_RESERVE_GB_PER_GPU, default_max_num_seqs
from llm_fabric.engine.capacity.model_shape import GB
from llm_fabric.engine.capacity.parallelism import tp_layout
from llm_fabric.engine.command import (
    POOL_PRIORITY,
    EngineCommand,
    ServingArgs,
    checked,
    generation_override,
    parser_args,
    served_as,
)
from llm_fabric.engine.loop_guard_config import loop_guard_settings
from llm_fabric.engine.recipes import Recipe, SglangSettings
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix

SGLANG_VERSION = "0.5.23"
LAUNCHER = ("python3", "-m", "sglang.launch_server")
# the fabric's KV-cache dtype names -> SGLang's --kv-cache-dtype choices; None: the model's dtype (no flag)
KV_CACHE_DTYPES: dict[str, str | None] = {
    "auto": None,
    "bf16": "bf16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


def sglang_settings(recipe: Recipe) -> SglangSettings:
    """The recipe's SGLang section, or UsageError when the recipe has not been made to run on SGLang."""
    if recipe.sglang is None:
        raise UsageError(
            f"recipe `{recipe.id}` has no `sglang:` section: it is not known to run on SGLang",
            hint="serve it with `engine: vllm`, or add the section (parsers, arguments) to its recipe",
        )
    return recipe.sglang


def mem_fraction_static(
    gpu: GpuSpec, gpu_memory_utilization: float, runtime_reserve_gb: float = RUNTIME_RESERVE_GB_PER_GPU
) -> float:
    """SGLang's `--mem-fraction-static` giving the KV pool that vLLM's `gpu_memory_utilization` gives.

    vLLM budget per GPU: utilization x memory = weights + runtime reserve + KV pool. SGLang's static
    share: fraction x memory = weights + KV pool. Same pool <=> fraction = utilization - reserve / memory,
    rounded down (three decimals) so the pool is never larger than planned.
    """
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise UsageError(f"gpu_memory_utilization must be in (0, 1] (got {gpu_memory_utilization})")
    fraction = gpu_memory_utilization - runtime_reserve_gb * GB / gpu.memory_bytes
    if fraction <= 0.05:
        raise UsageError(
            f"{gpu.id}: {gpu_memory_utilization:g} of {gpu.memory_gb:g} GB leaves no static memory "
            f"after the {runtime_reserve_gb:g} GB runtime reserve",
            hint="raise gpu_memory_utilization",
        )
    return math.floor(fraction * 1000) / 1000


def _parallel_args(recipe: Recipe, tp: int, attn_dp_size: int, ep_size: int) -> list[str]:
    if attn_dp_size < 1 or tp % attn_dp_size:
        raise UsageError(
            f"attention data-parallel size {attn_dp_size} must divide the tensor-parallel size {tp}",
            hint="SGLang runs the attention DP groups inside the TP group",
        )
    if ep_size < 1 or tp % ep_size:
        raise UsageError(f"expert-parallel size {ep_size} must divide the tensor-parallel size {tp}")
    if ep_size > 1 and recipe.architecture.experts is None:
        raise UsageError(f"{recipe.id} is not a mixture of experts: expert parallelism does not apply")
    args = ["--tp-size", str(tp)]
    if attn_dp_size > 1:
        args += ["--attn-dp-size", str(attn_dp_size)]  # SGLang 0.5.23: `--enable-dp-attention` is deprecated
    if ep_size > 1:
        args += ["--ep-size", str(ep_size)]
    return args


def parallel_sizes(serving: ServingArgs) -> tuple[int, int, int]:
    """(tensor-parallel, attention-DP, expert-parallel) sizes: SGLang's own when given, else the layout's.

    A data-parallel-attention layout is `--tp N --attn-dp-size N --ep-size N` (SGLang's tensor parallel
    size counts every GPU of the replica); multi-node replicas are generated for vLLM only.
    """
    layout = serving.layout
    if layout is None or serving.attn_dp_size is not None or serving.ep_size is not None:
        tp = serving.tensor_parallel_size or (layout.gpus if layout is not None else None)
        if tp is None:
            raise UsageError("a tensor-parallel size or a layout is needed for the SGLang command")
        if layout is None and serving.attn_dp_size is None and serving.ep_size is None:
            layout = tp_layout(tp, gpus_per_node=max(tp, serving.gpu.gpus_per_node))
        else:
            return tp, serving.attn_dp_size or 1, serving.ep_size or 1
    if layout.multi_node or layout.pipeline_parallel_size > 1:
        raise UsageError(
            f"`{serving.model_name}`: a replica across {layout.nodes} nodes is generated for vLLM only",
            hint="serve it with `engine: vllm`, or on GPUs of which one node holds the model",
        )
    dp = layout.data_parallel_size if layout.expert_parallel else 1
    return layout.gpus, dp, layout.gpus if layout.expert_parallel else 1


def sglang_command(serving: ServingArgs) -> EngineCommand:
    """`sglang.launch_server` arguments and environment; refused (exit 3) when the kernel is not native.

    `max_num_seqs` (--max-running-requests) defaults to what vLLM's --max-num-seqs would be on the GPU
    (the capacity model's cap), `max_queued_requests` to as many again.
    """
    recipe, gpu = serving.recipe, serving.gpu
    max_running_requests, max_queued_requests = serving.max_num_seqs, serving.max_queued_requests
    tensor_parallel_size, attn_dp_size, ep_size = parallel_sizes(serving)
    settings = sglang_settings(recipe)
    for name, value in (("max_running_requests", max_running_requests), ("max_queued_requests", max_queued_requests)):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be at least 1 (got {value})")
    resolved = checked(
        recipe, gpu, tensor_parallel_size, serving.quantization, serving.kv_cache_dtype, serving.max_model_len
    )
    quant, kv, length = resolved.quantization, resolved.kv_cache_dtype, resolved.context_length
    if kv not in KV_CACHE_DTYPES:
        raise UsageError(
            f"SGLang has no KV-cache dtype `{kv}`",
            hint=f"use one of {', '.join(k for k in KV_CACHE_DTYPES if k in recipe.kv_cache_dtypes)}",
        )
    running = max_running_requests or default_max_num_seqs(gpu)
    args = ["--model-path", resolved.checkpoint, *served_as(serving)]
    args += _parallel_args(recipe, tensor_parallel_size, attn_dp_size, ep_size)
    if quant in settings.quantization_args:
        args += ["--quantization", settings.quantization_args[quant]]
    if KV_CACHE_DTYPES[kv] is not None:
        args += ["--kv-cache-dtype", str(KV_CACHE_DTYPES[kv])]
    args += [
        "--context-length",
        str(length),
        "--mem-fraction-static",
        f"{mem_fraction_static(gpu, serving.gpu_memory_utilization):g}",
        "--max-running-requests",
        str(running),
        "--max-queued-requests",
        str(max_queued_requests or running),
    ]
    args += parser_args(settings, trust_remote_code=recipe.trust_remote_code)
    args += ["--enable-metrics", "--enable-cache-report"]
    if serving.priority_scheduling:
        args += [
            "--enable-priority-scheduling",
            "--schedule-low-priority-values-first",
            "--default-priority-value",
            str(POOL_PRIORITY),
        ]
    args += settings.extra_args
    # the kernel matrix's switches are vLLM's (VLLM_USE_DEEP_GEMM...): SGLang picks its kernels itself
    env = {
        k: v
        for k, v in load_kernel_matrix().for_architecture(gpu.architecture).env.items()
        if not k.startswith("VLLM_")
    }
    if serving.loop_guard:
        # only for the loop guard, which SGLang runs as a request's custom logit processor: the flag lets a
        # request carry code (dill-loaded), so it is off for a recipe without the guard; with it, only the
        # gateway reaches the engine (serving.workloads' ingress policy) and the gateway drops a client's own
        # `custom_logit_processor` (gateway.runtime.policy.ENGINE_ONLY_FIELDS)
        args.append("--enable-custom-logit-processor")
        env |= loop_guard_settings(recipe.id).to_env()
    override = generation_override(
        recipe, max_output_tokens=serving.max_output_tokens, temperature=serving.temperature, top_p=serving.top_p
    )
    request_defaults: dict[str, float | int] = {"max_tokens": int(override.pop("max_new_tokens"))}
    request_defaults |= override
    penalty = serving.presence_penalty if serving.presence_penalty is not None else recipe.generation.presence_penalty
    if penalty is not None:
        request_defaults["presence_penalty"] = penalty
    return EngineCommand(args=args, env=env, launcher=LAUNCHER, request_defaults=request_defaults)
