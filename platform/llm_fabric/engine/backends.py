"""Which engine serves a deployment, and its command, whichever engine it is.

A deployment says `engine: vllm | sglang` in the site repo; else the site's `defaults.engine` in
fabric.yaml; else its recipe's `engine` (vLLM unless the recipe says otherwise). The plan calls
`command_for` and records the engine with each replica; the renderer and the gateway read it there.
"""

from __future__ import annotations

from typing import TypedDict

from llm_fabric.engine.capacity.parallelism import Layout, tp_layout
from llm_fabric.engine.recipes import EngineName, Recipe
from llm_fabric.engine.sglang.command import sglang_command
from llm_fabric.engine.vllm.command import EngineCommand, engine_command
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import GpuSpec
from llm_fabric.site.models import Deployment


class _CommonArgs(TypedDict):
    """What both engines' command builders take under the same names."""

    quantization: str | None
    kv_cache_dtype: str | None
    max_model_len: int | None
    gpu_memory_utilization: float
    max_output_tokens: int | None
    presence_penalty: float | None
    priority_scheduling: bool
    served_model_name: str | None


def deployment_engine(dep: Deployment, recipe: Recipe, site_default: EngineName | None = None) -> EngineName:
    return dep.engine or site_default or recipe.engine


def command_for(
    engine: EngineName,
    recipe: Recipe,
    *,
    gpu: GpuSpec,
    layout: Layout | None = None,
    tensor_parallel_size: int | None = None,
    node_rank: int = 0,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    max_output_tokens: int | None = None,
    presence_penalty: float | None = None,
    priority_scheduling: bool = False,
    served_model_name: str | None = None,
) -> EngineCommand:
    """The engine's command for one replica's `layout` (default: tensor parallel over `tensor_parallel_size`
    GPUs of one node); `max_num_seqs` is vLLM's --max-num-seqs or SGLang's --max-running-requests.

    On SGLang a data-parallel-attention layout is `--tp N --attn-dp-size N --ep-size N` (SGLang's tensor
    parallel size counts every GPU of the replica); multi-node replicas are generated for vLLM only.
    """
    common: _CommonArgs = {
        "quantization": quantization,
        "kv_cache_dtype": kv_cache_dtype,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_output_tokens": max_output_tokens,
        "presence_penalty": presence_penalty,
        "priority_scheduling": priority_scheduling,
        "served_model_name": served_model_name,
    }
    if engine == "sglang":
        if layout is None:
            if tensor_parallel_size is None:
                raise UsageError("a tensor-parallel size or a layout is needed for the SGLang command")
            layout = tp_layout(tensor_parallel_size, gpus_per_node=max(tensor_parallel_size, gpu.gpus_per_node))
        if layout.multi_node or layout.pipeline_parallel_size > 1:
            raise UsageError(
                f"`{served_model_name or recipe.id}`: a replica across {layout.nodes} nodes is generated for vLLM only",
                hint="serve it with `engine: vllm`, or on GPUs of which one node holds the model",
            )
        dp = layout.data_parallel_size if layout.expert_parallel else 1
        return sglang_command(
            recipe,
            gpu=gpu,
            tensor_parallel_size=layout.gpus,
            attn_dp_size=dp,
            ep_size=layout.gpus if layout.expert_parallel else 1,
            max_running_requests=max_num_seqs,
            **common,
        )
    return engine_command(
        recipe,
        gpu=gpu,
        tensor_parallel_size=tensor_parallel_size,
        layout=layout,
        node_rank=node_rank,
        max_num_seqs=max_num_seqs,
        **common,
    )
