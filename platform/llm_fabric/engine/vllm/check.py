"""Every recipe's engine args on every GPU that can run it, checked by the installed vLLM itself.

The cases are built here, in the fabric's environment, with `engine_command`; vLLM parses them in
its own environment (`llm_fabric.engine.runtime.vllm_probe`, one subprocess for all cases because
importing vLLM takes many seconds). A (recipe, GPU, quantization) that the kernel matrix refuses is
not a case: the fabric never generates args for it.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.engine.argcheck import ArgCase, ArgVerdict, run_probe
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.process import engine_python
from llm_fabric.engine.recipes import Recipe, load_recipes
from llm_fabric.engine.vllm.command import engine_command
from llm_fabric.errors import PolicyRefusal
from llm_fabric.hardware.catalog import load_gpu_catalog


def recipe_cases(recipes: dict[str, Recipe] | None = None) -> tuple[list[ArgCase], list[str]]:
    """(cases, refused labels): every recipe x GPU x offered quantization x KV dtype, largest TP <= 8."""
    cases: list[ArgCase] = []
    refused: list[str] = []
    for recipe in (recipes or load_recipes()).values():
        tp = max((t for t in recipe.tensor_parallel_sizes if t <= 8), default=min(recipe.tensor_parallel_sizes))
        for gpu in load_gpu_catalog().all():
            for quant in recipe.quantizations:
                for kv in recipe.kv_cache_dtypes:
                    label = f"{recipe.id} on {gpu.id} ({quant}, kv {kv}, tp {tp})"
                    try:
                        command = engine_command(
                            ServingArgs(recipe, gpu, tensor_parallel_size=tp, quantization=quant, kv_cache_dtype=kv)
                        )
                    except PolicyRefusal:
                        refused.append(label)
                        continue
                    cases.append(ArgCase(label, command.args))  # the loop guard's flags included
    return cases, refused


def layout_cases(recipes: dict[str, Recipe] | None = None) -> list[ArgCase]:
    """Every parallelism layout the capacity model can choose, for every node of a multi-node replica:
    DP-EP on one node and on two, TP x PP on two nodes (leader and headless worker)."""
    from llm_fabric.engine.capacity.parallelism import Layout, dp_ep_layout, tp_layout

    cases: list[ArgCase] = []
    gpu = load_gpu_catalog().get("h200")
    for recipe in (recipes or load_recipes()).values():
        layouts: list[Layout] = [tp_layout(max(t for t in recipe.tensor_parallel_sizes if t <= 8), 8, nodes=2)]
        if "dp-ep" in recipe.parallelism:
            layouts += [dp_ep_layout(8, 8), dp_ep_layout(16, 8)]
        for layout in layouts:
            for rank in range(layout.nodes):
                try:
                    command = engine_command(ServingArgs(recipe, gpu, layout=layout, node_rank=rank))
                except PolicyRefusal:
                    continue
                cases.append(ArgCase(f"layout: {recipe.id}, {layout.describe()}, node {rank}", command.args))
    return cases


def check_with_vllm(cases: list[ArgCase], python: Path | None = None, timeout: float = 300) -> list[ArgVerdict]:
    """Run the cases through the installed vLLM's parser and registries."""
    env = {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
    return run_probe(
        "vLLM", python or engine_python(), ["llm_fabric.engine.runtime.vllm_probe", "args"], cases, env, timeout
    )
