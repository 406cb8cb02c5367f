"""Every recipe's engine args on every GPU that can run it, checked by the installed vLLM itself.

The cases are built here, in the fabric's environment, with `engine_command`; vLLM parses them in
its own environment (`llm_fabric.engine.runtime.vllm_probe`, one subprocess for all cases because
importing vLLM takes many seconds). A (recipe, GPU, quantization) that the kernel matrix refuses is
not a case: the fabric never generates args for it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llm_fabric.engine.local.server import engine_python
from llm_fabric.engine.recipes import Recipe, load_recipes
from llm_fabric.engine.vllm.command import engine_command
from llm_fabric.errors import FabricError, PolicyRefusal
from llm_fabric.hardware.catalog import load_gpu_catalog


@dataclass(frozen=True)
class ArgCase:
    label: str
    args: list[str]


@dataclass(frozen=True)
class ArgVerdict:
    label: str
    ok: bool
    problems: list[str]


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
                            recipe, gpu=gpu, tensor_parallel_size=tp, quantization=quant, kv_cache_dtype=kv
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
                    command = engine_command(recipe, gpu=gpu, layout=layout, node_rank=rank)
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


def run_probe(
    engine: str, interpreter: Path, module: list[str], cases: list[ArgCase], env: dict[str, str], timeout: float
) -> list[ArgVerdict]:
    """`python -m MODULE...` in the engine venv, the cases as JSON on stdin, the verdicts as JSON on stdout."""
    payload = json.dumps([{"label": c.label, "args": c.args} for c in cases])
    try:
        done = subprocess.run(
            [str(interpreter), "-m", *module],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env | {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        )
    except subprocess.TimeoutExpired as exc:
        raise FabricError(f"{engine}'s argument check did not finish in {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise FabricError(
            f"{engine}'s argument check failed (exit {done.returncode}):\n{done.stderr[-2000:]}",
            hint="is llm-fabric installed in the engine environment? (`make engine` does it)",
        )
    return [ArgVerdict(r["label"], bool(r["ok"]), list(r["problems"])) for r in json.loads(done.stdout)]
