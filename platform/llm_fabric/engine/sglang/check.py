"""Every recipe's SGLang command on every GPU that can run it, checked by SGLang's own argument parser.

The counterpart of `llm_fabric.engine.vllm.check`. The cases are built here with `sglang_command`;
SGLang's parser runs in the engine venv over the pinned wheel that `make engine` fetched without
dependencies and unpacked into `.cache/sglang/<version>/` (`llm_fabric.engine.runtime.sglang_probe`,
one subprocess for all cases). Nothing is downloaded here: a missing cache is a UsageError naming
the make target. Recipes without an `sglang:` section are not cases (they cannot be asked for).
"""

from __future__ import annotations

import os
from pathlib import Path

from llm_fabric.distribution import checkout_root
from llm_fabric.engine.argcheck import ArgCase, ArgVerdict, run_probe
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.process import engine_python
from llm_fabric.engine.recipes import Recipe, load_recipes
from llm_fabric.engine.sglang.command import SGLANG_VERSION, sglang_command
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog

WHEEL_CACHE = Path(".cache") / "sglang"


def wheel_dir(explicit: Path | None = None) -> Path:
    """The unpacked pinned SGLang wheel: FABRIC_SGLANG_WHEEL_DIR, or the checkout's .cache/sglang/VERSION."""
    env = os.environ.get("FABRIC_SGLANG_WHEEL_DIR")
    folder = explicit or (Path(env) if env else checkout_root() / WHEEL_CACHE / SGLANG_VERSION)
    if not (folder / "sglang" / "srt" / "server_args.py").is_file():
        raise UsageError(
            f"the SGLang {SGLANG_VERSION} wheel is not unpacked in {folder}",
            hint="run `make engine` (fetches it without dependencies) or set FABRIC_SGLANG_WHEEL_DIR",
        )
    return folder


def sglang_cases(recipes: dict[str, Recipe] | None = None) -> tuple[list[ArgCase], list[str]]:
    """(cases, refused labels): every SGLang-capable recipe x GPU x quantization x KV dtype, largest TP <= 8,
    once with TP alone and, for mixtures of experts, once with DP attention and EP across the TP group."""
    cases: list[ArgCase] = []
    refused: list[str] = []
    for recipe in (recipes or load_recipes()).values():
        if recipe.sglang is None:
            continue
        tp = max((t for t in recipe.tensor_parallel_sizes if t <= 8), default=min(recipe.tensor_parallel_sizes))
        shapes = [(1, 1)] + ([(tp, tp)] if recipe.architecture.experts is not None and tp > 1 else [])
        for gpu in load_gpu_catalog().all():
            for quant in recipe.quantizations:
                for kv in recipe.kv_cache_dtypes:
                    for dp, ep in shapes:
                        label = f"{recipe.id} on {gpu.id} ({quant}, kv {kv}, tp {tp}, dp-attn {dp}, ep {ep})"
                        try:
                            serving = ServingArgs(
                                recipe,
                                gpu,
                                tensor_parallel_size=tp,
                                attn_dp_size=dp,
                                ep_size=ep,
                                quantization=quant,
                                kv_cache_dtype=kv,
                                priority_scheduling=True,
                            )
                            command = sglang_command(serving)
                        except PolicyRefusal:
                            refused.append(label)
                            continue
                        cases.append(ArgCase(label, command.args))
    return cases, refused


def check_with_sglang(
    cases: list[ArgCase], python: Path | None = None, wheel: Path | None = None, timeout: float = 300
) -> list[ArgVerdict]:
    """Run the cases through the pinned SGLang's own parser (in the engine venv)."""
    module = ["llm_fabric.engine.runtime.sglang_probe", "args", str(wheel_dir(wheel))]
    env = {"HF_HUB_OFFLINE": "1"}
    if os.environ.get("PYTHONPATH"):  # a checkout's llm_fabric ahead of the engine venv's install
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return run_probe(f"SGLang {SGLANG_VERSION}", python or engine_python(), module, cases, env, timeout)
