"""Which engine serves a deployment (deployment, then the site's default, then the recipe) and its command."""

from __future__ import annotations

from llm_fabric.engine.backends import command_for, deployment_engine
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.engine.sglang.command import LAUNCHER
from llm_fabric.hardware.catalog import load_gpu_catalog
from llm_fabric.site.models import Deployment


def _deployment(**fields: object) -> Deployment:
    return Deployment.model_validate(
        {"name": "qwen", "recipe": "qwen3.5-122b", "replicas": 1, "data_classes": ["public"], **fields}
    )


def test_the_deployment_then_the_site_then_the_recipe_decide() -> None:
    recipe = load_recipes()["qwen3.5-122b"]
    sglang_recipe = recipe.model_copy(update={"engine": "sglang"})
    assert deployment_engine(_deployment(), recipe) == "vllm"
    assert deployment_engine(_deployment(), sglang_recipe) == "sglang"
    assert deployment_engine(_deployment(), recipe, "sglang") == "sglang"
    assert deployment_engine(_deployment(engine="vllm"), sglang_recipe, "sglang") == "vllm"
    assert deployment_engine(_deployment(engine="sglang"), recipe, "vllm") == "sglang"


def test_command_for_builds_each_engines_command() -> None:
    recipe, gpu = load_recipes()["qwen3.5-122b"], load_gpu_catalog().get("h200")
    vllm = command_for(
        "vllm", ServingArgs(recipe, gpu=gpu, tensor_parallel_size=2, max_num_seqs=64, served_model_name="q")
    )
    sglang = command_for(
        "sglang", ServingArgs(recipe, gpu=gpu, tensor_parallel_size=2, max_num_seqs=64, served_model_name="q")
    )
    assert vllm.argv()[:3] == ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8"]
    assert vllm.args[vllm.args.index("--max-num-seqs") + 1] == "64"
    assert sglang.argv()[:3] == list(LAUNCHER)
    assert sglang.args[sglang.args.index("--max-running-requests") + 1] == "64"
    assert sglang.args[sglang.args.index("--served-model-name") + 1] == "q"
