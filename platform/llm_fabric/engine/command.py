"""What every engine backend's command builder takes and gives: `ServingArgs` in, `EngineCommand` out.

`ServingArgs` is the one spelling of a replica's serving options, carried from the plan's sizing
(`plan.figures`) and the CLI to the backend's builder (`engine.vllm.command`, `engine.sglang.command`);
`checked` is the check both engines share (kernel matrix, TP size, KV dtype, context) and what it
resolves (the checkpoint a quantization loads, the context length: `recipes.context_limit`),
`generation_override` the recipe's generation defaults in the keys both read, and `served_as` and
`parser_args` the flags both spell alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from llm_fabric.engine.capacity.parallelism import Layout
from llm_fabric.engine.recipes import QuantizationOption, Recipe, context_limit
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix

# the port every engine listens on inside its pod (the renderer's Service and probes, the gateway's routes)
ENGINE_PORT = 8000
# priorities the fabric sends, lower first (vLLM's polarity; SGLang runs with --schedule-low-priority-values-first).
# SGLang preempts a running request only for a newcomer at least --priority-scheduling-preemption-threshold
# (default 10) more urgent: owner and pool are exactly that far apart.
OWNER_PRIORITY = 0
POOL_PRIORITY = 10


@dataclass(frozen=True)
class EngineCommand:
    args: list[str]
    env: dict[str, str]
    launcher: tuple[str, ...]  # the engine's program: `vllm serve`, `python3 -m sglang.launch_server`
    request_defaults: dict[str, float | int] = field(default_factory=dict)

    def argv(self) -> list[str]:
        """The full command line, `vllm serve MODEL ...` or `python3 -m sglang.launch_server --model-path ...`."""
        return [*self.launcher, *self.args]

    def as_dict(self) -> dict[str, object]:
        return {"args": self.args, "env": self.env, "request_defaults": self.request_defaults, "argv": self.argv()}


@dataclass(frozen=True)
class ServingArgs:
    """One replica's serving options, whichever engine serves it.

    The parallelism is `layout` (default: tensor parallel over `tensor_parallel_size` GPUs of one node);
    `node_rank` says which node of a multi-node replica the command is for (0: the leader).
    `max_num_seqs` is the batch cap (vLLM's --max-num-seqs, SGLang's --max-running-requests; default the
    capacity model's), `max_queued_requests` the queue bound of an engine that has one (SGLang).
    `attn_dp_size`/`ep_size` are an engine's own attention-DP and expert-parallel sizes given as such
    (`fabric engine-args --attn-dp/--ep`) instead of from the layout; None: from the layout.
    `loop_guard=False` leaves the fabric's loop guard out (for comparing a guarded engine with an unguarded one).
    """

    recipe: Recipe
    gpu: GpuSpec
    layout: Layout | None = None
    tensor_parallel_size: int | None = None
    node_rank: int = 0
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    max_queued_requests: int | None = None
    max_output_tokens: int | None = None
    presence_penalty: float | None = None
    temperature: float | None = None
    top_p: float | None = None
    priority_scheduling: bool = False
    served_model_name: str | None = None
    port: int = ENGINE_PORT
    loop_guard: bool = True
    attn_dp_size: int | None = None
    ep_size: int | None = None

    @property
    def model_name(self) -> str:
        """The name the engine answers to: the given one (the plan's: the deployment's), else the recipe's id."""
        return self.served_model_name or self.recipe.id


@dataclass(frozen=True)
class Checked:
    """What `checked` resolves of a replica's serving options."""

    quantization: str
    option: QuantizationOption
    kv_cache_dtype: str
    context_length: int

    @property
    def checkpoint(self) -> str:
        """The Hugging Face repo the quantization loads: the recipe's, the one place it is looked up."""
        return self.option.checkpoint


def checked(
    recipe: Recipe,
    gpu: GpuSpec,
    tensor_parallel_size: int,
    quantization: str | None,
    kv_cache_dtype: str | None,
    max_model_len: int | None,
) -> Checked:
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
    length = context_limit(recipe, max_model_len)
    if length > recipe.architecture.max_context:
        raise UsageError(f"max_model_len {length} exceeds {recipe.id}'s context of {recipe.architecture.max_context}")
    return Checked(quant, option, kv, length)


def request_defaults(
    recipe: Recipe, *, max_output_tokens: int | None = None, presence_penalty: float | None = None
) -> dict[str, float | int]:
    """What the gateway puts in every request, whichever engine serves it: the output cap, and the penalty
    vLLM's generation override cannot set."""
    out: dict[str, float | int] = {"max_tokens": max_output_tokens or recipe.generation.max_output_tokens}
    penalty = presence_penalty if presence_penalty is not None else recipe.generation.presence_penalty
    if penalty is not None:
        out["presence_penalty"] = penalty
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


def served_as(serving: ServingArgs) -> list[str]:
    """The name the engine answers to (what the gateway routes by) and the address it listens on in its pod."""
    name = serving.served_model_name or serving.recipe.id
    return ["--served-model-name", name, "--host", "0.0.0.0", "--port", str(serving.port)]


class ParserNames(Protocol):
    """A recipe's parsers in one engine's names: the recipe itself (vLLM's), or its `sglang:` section."""

    @property
    def tool_call_parser(self) -> str | None: ...
    @property
    def reasoning_parser(self) -> str | None: ...
    @property
    def chat_template(self) -> str | None: ...


def parser_args(names: ParserNames, *, trust_remote_code: bool, tool_choice: tuple[str, ...] = ()) -> list[str]:
    """The tool-call and reasoning parsers, the chat template and remote code: flags vLLM and SGLang spell alike.

    `tool_choice`: the flags an engine needs before its tool-call parser does anything (vLLM's
    `--enable-auto-tool-choice`).
    """
    out: list[str] = []
    if names.tool_call_parser:
        out += [*tool_choice, "--tool-call-parser", names.tool_call_parser]
    if names.reasoning_parser:
        out += ["--reasoning-parser", names.reasoning_parser]
    if names.chat_template:
        out += ["--chat-template", names.chat_template]
    if trust_remote_code:
        out.append("--trust-remote-code")
    return out
