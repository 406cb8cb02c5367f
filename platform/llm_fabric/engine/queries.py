"""What `fabric capacity` and `fabric engine-args` ask, as data, and the one function that answers each."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from llm_fabric.engine.backend import CapacityQuery, CapacityReport
from llm_fabric.engine.backends import backend
from llm_fabric.engine.capacity.model import LatencyTarget, estimate
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.recipes import context_limit, get_recipe
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog

Parallelism = Literal["tp", "dp-ep", "auto"]


class OptionError(UsageError):
    """An option's value, or two options together, refused: the CLI shows it as its own usage error.

    `value`: the value of one option is wrong (click's "Invalid value"), else the combination is.
    """

    def __init__(self, message: str, *, value: bool = False) -> None:
        super().__init__(message)
        self.value = value


@dataclass(frozen=True)
class CapacityRequest:
    """What `fabric capacity` was asked for one recipe on a set of GPUs (`users`: a number or `max`, as typed)."""

    model: str
    gpu_id: str
    count: int
    gpus_per_node: int | None
    tp: int | None
    parallelism: Parallelism
    quantization: str | None
    kv_dtype: str | None
    context: int | None
    input_tokens: int | None
    output_tokens: int | None
    users: str
    itl_ms: float | None
    ttft_ms: float | None
    gpu_memory_utilization: float
    max_num_seqs: int | None
    engine: str
    attn_dp: int


def _users(value: str) -> int | Literal["max"]:
    if value == "max":
        return "max"
    try:
        return int(value)
    except ValueError:
        raise OptionError(f"`{value}` is neither a number of sessions nor `max`", value=True) from None


def capacity_report(request: CapacityRequest) -> CapacityReport:
    """The chosen engine's capacity of `request`'s recipe on its GPUs."""
    chosen = backend(request.engine)
    if request.attn_dp != 1 and not chosen.attention_dp:
        raise OptionError("--attn-dp is SGLang's (add --engine sglang)")
    query = CapacityQuery(
        get_recipe(request.model),
        load_gpu_catalog().get(request.gpu_id),
        request.count,
        tensor_parallel_size=request.tp,
        parallelism=request.parallelism,
        gpus_per_node=request.gpus_per_node,
        quantization=request.quantization,
        kv_cache_dtype=request.kv_dtype,
        context_tokens=request.context,
        input_tokens=request.input_tokens,
        output_tokens=request.output_tokens,
        users=_users(request.users),
        gpu_memory_utilization=request.gpu_memory_utilization,
        max_num_seqs=request.max_num_seqs,
        latency_target=LatencyTarget(request.itl_ms, request.ttft_ms),
        attn_dp_size=request.attn_dp,
    )
    return chosen.capacity(query)


@dataclass(frozen=True)
class EngineArgsRequest:
    """What `fabric engine-args` was asked: a recipe on a GPU model, the layout and the engine's own sizes."""

    model: str
    gpu_id: str
    count: int
    tp: int | None
    parallelism: Parallelism
    node_rank: int
    quantization: str | None
    kv_dtype: str | None
    max_model_len: int | None
    gpu_memory_utilization: float
    max_num_seqs: int | None
    priority: bool
    engine: str | None
    attn_dp: int
    ep: int


@dataclass(frozen=True)
class EngineArgs:
    """The engine command of a request, the engine it is for, and whether its model is positional (vLLM's)."""

    command: EngineCommand
    engine: str
    model_positional: bool

    def as_dict(self) -> dict[str, object]:
        return self.command.as_dict() | {"engine": self.engine}

    def lines(self) -> list[str]:
        """The environment as `export` lines, then the command, one flag with its value a line."""
        cmd = self.command
        out = [f"export {key}={shlex.quote(value)}" for key, value in sorted(cmd.env.items())]
        # vLLM's model is positional: it stays on the first line with `vllm serve`
        head = len(cmd.launcher) + (1 if self.model_positional else 0)
        out.append(" \\\n    ".join(_pairs(cmd.argv(), head)))
        if cmd.request_defaults:
            out.append(f"# request defaults for the gateway to inject: {cmd.request_defaults}")
        return out


def engine_args(request: EngineArgsRequest) -> EngineArgs:
    """The engine command and environment of `request`'s recipe on its GPU model."""
    recipe = get_recipe(request.model)
    gpu = load_gpu_catalog().get(request.gpu_id)
    layout = estimate(
        recipe,
        gpu,
        request.count,
        tensor_parallel_size=request.tp,
        parallelism=request.parallelism,
        quantization=request.quantization,
        kv_cache_dtype=request.kv_dtype,
        context_tokens=context_limit(recipe, request.max_model_len),
        gpu_memory_utilization=request.gpu_memory_utilization,
    ).layout
    engine = request.engine or recipe.engine
    chosen = backend(engine)
    own_sizes = (request.attn_dp, request.ep) != (1, 1)
    if own_sizes and not chosen.attention_dp:
        raise OptionError("--attn-dp and --ep are SGLang's (add --engine sglang); vLLM's is --parallelism")
    serving = ServingArgs(
        recipe,
        gpu,
        # the engine's own sizes, as given: then its tensor parallel size counts every GPU of the replica
        layout=None if own_sizes else layout,
        tensor_parallel_size=(request.tp or layout.gpus) if own_sizes else None,
        attn_dp_size=request.attn_dp if own_sizes else None,
        ep_size=request.ep if own_sizes else None,
        node_rank=0 if own_sizes else request.node_rank,
        quantization=request.quantization,
        kv_cache_dtype=request.kv_dtype,
        max_model_len=request.max_model_len,
        gpu_memory_utilization=request.gpu_memory_utilization,
        max_num_seqs=request.max_num_seqs,
        priority_scheduling=request.priority,
    )
    return EngineArgs(chosen.command(serving), engine, chosen.model_positional)


def _pairs(argv: list[str], head: int = 3) -> list[str]:
    """The first `head` words (`vllm serve MODEL`) on the first line, then each flag with its value on its own."""
    out: list[str] = [" ".join(shlex.quote(a) for a in argv[:head])]
    for item in argv[head:]:
        if out and not item.startswith("--") and out[-1].startswith("--") and " " not in out[-1]:
            out[-1] += " " + shlex.quote(item)
        else:
            out.append(shlex.quote(item))
    return out
