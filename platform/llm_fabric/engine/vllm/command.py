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

from llm_fabric.engine.capacity.model import default_max_num_seqs
from llm_fabric.engine.capacity.parallelism import Layout, engine_parallel_args
from llm_fabric.engine.command import (
    EngineCommand,
    ServingArgs,
    checked,
    generation_override,
    parser_args,
    request_defaults,
    served_as,
)
from llm_fabric.engine.loop_guard_config import loop_guard_flags
from llm_fabric.errors import UsageError
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix

# The vLLM release the recipes' engine args are checked against (the `engine-cpu` extra pins the same)
# and the fabric's vLLM image is built from.
VLLM_VERSION = "0.32.0"
LAUNCHER = ("vllm", "serve")


def engine_command(serving: ServingArgs) -> EngineCommand:
    """`vllm serve` arguments (model first) and environment; refused (exit 3) when the kernel is not native.

    `max_num_seqs` (default: vLLM's own for the GPU, capacity.default_max_num_seqs) is always passed,
    so the engine runs as many sequences at once as the capacity figures assume.
    """
    recipe, gpu = serving.recipe, serving.gpu
    layout = serving.layout
    if layout is None:
        if serving.tensor_parallel_size is None:
            raise UsageError("engine_command needs tensor_parallel_size or a layout")
        layout = Layout("tp", tensor_parallel_size=serving.tensor_parallel_size)
    utilization, max_num_seqs = serving.gpu_memory_utilization, serving.max_num_seqs
    if not 0.0 < utilization <= 1.0:
        raise UsageError(f"gpu_memory_utilization must be in (0, 1] (got {utilization})")
    if max_num_seqs is not None and max_num_seqs < 1:
        raise UsageError(f"max_num_seqs must be at least 1 (got {max_num_seqs})")
    resolved = checked(
        recipe, gpu, layout.tensor_parallel_size, serving.quantization, serving.kv_cache_dtype, serving.max_model_len
    )
    option, kv, length = resolved.option, resolved.kv_cache_dtype, resolved.context_length
    args = [resolved.checkpoint, *served_as(serving), *engine_parallel_args(layout, node_rank=serving.node_rank)]
    if option.quantization_arg:
        args += ["--quantization", option.quantization_arg]
    if kv != "auto":
        args += ["--kv-cache-dtype", kv]
    args += [
        "--max-model-len",
        str(length),
        "--gpu-memory-utilization",
        f"{utilization:g}",
        "--max-num-seqs",
        str(max_num_seqs or default_max_num_seqs(gpu)),
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        # usage on every response, streamed ones too, with the cached prompt tokens: the gateway's meter
        # reads them, and the ledger's cached-input line is wrong without them
        "--enable-prompt-tokens-details",
        "--enable-force-include-usage",
    ]
    args += parser_args(recipe, trust_remote_code=recipe.trust_remote_code, tool_choice=("--enable-auto-tool-choice",))
    override = generation_override(
        recipe, max_output_tokens=serving.max_output_tokens, temperature=serving.temperature, top_p=serving.top_p
    )
    args += ["--override-generation-config", json.dumps(override, sort_keys=True)]
    if serving.priority_scheduling:
        args += ["--scheduling-policy", "priority"]
    args += recipe.extra_args
    env = dict(load_kernel_matrix().for_architecture(gpu.architecture).env)
    if serving.loop_guard:
        guard = loop_guard_flags(recipe.id)
        args += guard.args
        env |= guard.env
    defaults = request_defaults(
        recipe, max_output_tokens=serving.max_output_tokens, presence_penalty=serving.presence_penalty
    )
    return EngineCommand(args=args, env=env, launcher=LAUNCHER, request_defaults=defaults)
