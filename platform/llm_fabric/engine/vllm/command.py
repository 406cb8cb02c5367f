"""`vllm serve` arguments and environment for a recipe on a GPU model.

The argument list is what follows `vllm serve` (model first); the environment comes from the
kernel matrix. vLLM's `--override-generation-config` honours only repetition_penalty,
temperature, top_k, top_p, min_p and max_new_tokens (ModelConfig.get_diff_sampling_param), so a
recipe's presence_penalty cannot be set there: it is returned as a request default that the
gateway injects, and the output cap goes in both places (vLLM's default, the gateway's ceiling).

Every command loads the fabric's loop guard (`--logits-processors` plus its `FABRIC_LOOP_GUARD_*`
environment, per recipe from `engine/plugins/loop_guard.yaml`): a looping generation otherwise holds
its KV cache until the output cap (seed 000). The engine image must have llm-fabric installed for
vLLM to import the plugin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from llm_fabric.engine.capacity.model import default_max_num_seqs
from llm_fabric.engine.capacity.parallelism import Layout, engine_parallel_args
from llm_fabric.engine.loop_guard_config import loop_guard_flags
from llm_fabric.engine.recipes import Recipe
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix

ENGINE_PORT = 8000


@dataclass(frozen=True)
class EngineCommand:
    args: list[str]
    env: dict[str, str]
    request_defaults: dict[str, float | int] = field(default_factory=dict)
    launcher: tuple[str, ...] = ("vllm", "serve")  # SGLang's: llm_fabric.engine.sglang.command.LAUNCHER

    def argv(self) -> list[str]:
        """The full command line, `vllm serve MODEL ...` or `python3 -m sglang.launch_server --model-path ...`."""
        return [*self.launcher, *self.args]

    def as_dict(self) -> dict[str, object]:
        return {"args": self.args, "env": self.env, "request_defaults": self.request_defaults, "argv": self.argv()}


def _checked(
    recipe: Recipe,
    gpu: GpuSpec,
    tensor_parallel_size: int,
    quantization: str | None,
    kv_cache_dtype: str | None,
    max_model_len: int | None,
) -> tuple[str, str, int]:
    quant, option = recipe.quantization(quantization)
    runs, reason = load_kernel_matrix().runs(gpu.architecture, quant, allow_weight_only=option.weight_only_fallback)
    if not runs:
        raise PolicyRefusal(
            f"{recipe.id} in {quant} is refused on {gpu.id}: {reason}",
            hint=f"pick a quantization native on {gpu.architecture} or another GPU",
        )
    if tensor_parallel_size not in recipe.tensor_parallel_sizes:
        raise UsageError(
            f"{recipe.id} cannot run at tensor-parallel size {tensor_parallel_size}",
            hint=f"use one of {recipe.tensor_parallel_sizes}",
        )
    kv = kv_cache_dtype or "auto"
    if kv not in recipe.kv_cache_dtypes:
        raise UsageError(
            f"{recipe.id} does not offer KV-cache dtype `{kv}`", hint=f"use one of {', '.join(recipe.kv_cache_dtypes)}"
        )
    if kv not in load_kernel_matrix().for_architecture(gpu.architecture).kv_cache_dtypes:
        raise PolicyRefusal(f"KV-cache dtype `{kv}` has no kernel on {gpu.architecture} ({gpu.id})")
    length = max_model_len or recipe.architecture.max_context
    if length > recipe.architecture.max_context:
        raise UsageError(f"max_model_len {length} exceeds {recipe.id}'s context of {recipe.architecture.max_context}")
    return quant, kv, length


def _parser_args(recipe: Recipe) -> list[str]:
    out: list[str] = []
    if recipe.tool_call_parser:
        out += ["--enable-auto-tool-choice", "--tool-call-parser", recipe.tool_call_parser]
    if recipe.reasoning_parser:
        out += ["--reasoning-parser", recipe.reasoning_parser]
    if recipe.chat_template:
        out += ["--chat-template", recipe.chat_template]
    if recipe.trust_remote_code:
        out.append("--trust-remote-code")
    return out


def generation_override(
    recipe: Recipe,
    *,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
) -> dict[str, float | int]:
    """The JSON for --override-generation-config, in the keys vLLM reads (HF names)."""
    gen = recipe.generation
    override: dict[str, float | int] = {"max_new_tokens": max_output_tokens or gen.max_output_tokens}
    if (temperature if temperature is not None else gen.temperature) is not None:
        override["temperature"] = temperature if temperature is not None else gen.temperature  # type: ignore[assignment]
    if (top_p if top_p is not None else gen.top_p) is not None:
        override["top_p"] = top_p if top_p is not None else gen.top_p  # type: ignore[assignment]
    return override


def engine_command(
    recipe: Recipe,
    *,
    gpu: GpuSpec,
    tensor_parallel_size: int | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    max_output_tokens: int | None = None,
    presence_penalty: float | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    priority_scheduling: bool = False,
    served_model_name: str | None = None,
    port: int = ENGINE_PORT,
    loop_guard: bool = True,
    layout: Layout | None = None,
    node_rank: int = 0,
) -> EngineCommand:
    """`vllm serve` arguments (model first) and environment; refused (exit 3) when the kernel is not native.

    `max_num_seqs` (default: vLLM's own for the GPU, capacity.default_max_num_seqs) is always passed,
    so the engine runs as many sequences at once as the capacity figures assume.
    `loop_guard=False` leaves the guard out (for comparing a guarded engine with an unguarded one).
    `layout` (default: tensor parallel over `tensor_parallel_size` GPUs of one node) gives the parallelism
    flags, `node_rank` which node of a multi-node replica the command is for (0: the leader).
    """
    if layout is None:
        if tensor_parallel_size is None:
            raise UsageError("engine_command needs tensor_parallel_size or a layout")
        layout = Layout("tp", tensor_parallel_size=tensor_parallel_size)
    tensor_parallel_size = layout.tensor_parallel_size
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise UsageError(f"gpu_memory_utilization must be in (0, 1] (got {gpu_memory_utilization})")
    if max_num_seqs is not None and max_num_seqs < 1:
        raise UsageError(f"max_num_seqs must be at least 1 (got {max_num_seqs})")
    quant, kv, length = _checked(recipe, gpu, tensor_parallel_size, quantization, kv_cache_dtype, max_model_len)
    option = recipe.quantizations[quant]  # type: ignore[index]
    args = [
        option.checkpoint,
        "--served-model-name",
        served_model_name or recipe.id,
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        *engine_parallel_args(layout, node_rank=node_rank),
    ]
    if option.quantization_arg:
        args += ["--quantization", option.quantization_arg]
    if kv != "auto":
        args += ["--kv-cache-dtype", kv]
    args += [
        "--max-model-len",
        str(length),
        "--gpu-memory-utilization",
        f"{gpu_memory_utilization:g}",
        "--max-num-seqs",
        str(max_num_seqs or default_max_num_seqs(gpu)),
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        # usage on every response, streamed ones too, with the cached prompt tokens: the gateway's meter
        # reads them, and the ledger's cached-input line is wrong without them
        "--enable-prompt-tokens-details",
        "--enable-force-include-usage",
    ]
    args += _parser_args(recipe)
    override = generation_override(recipe, max_output_tokens=max_output_tokens, temperature=temperature, top_p=top_p)
    args += ["--override-generation-config", json.dumps(override, sort_keys=True)]
    if priority_scheduling:
        args += ["--scheduling-policy", "priority"]
    args += recipe.extra_args
    env = dict(load_kernel_matrix().for_architecture(gpu.architecture).env)
    if loop_guard:
        guard = loop_guard_flags(recipe.id)
        args += guard.args
        env |= guard.env
    defaults = request_defaults(recipe, max_output_tokens=max_output_tokens, presence_penalty=presence_penalty)
    return EngineCommand(args=args, env=env, request_defaults=defaults)


def request_defaults(
    recipe: Recipe, *, max_output_tokens: int | None = None, presence_penalty: float | None = None
) -> dict[str, float | int]:
    """What the gateway puts in every request: the output cap, and the penalty vLLM's override cannot set."""
    out: dict[str, float | int] = {"max_tokens": max_output_tokens or recipe.generation.max_output_tokens}
    penalty = presence_penalty if presence_penalty is not None else recipe.generation.presence_penalty
    if penalty is not None:
        out["presence_penalty"] = penalty
    return out
