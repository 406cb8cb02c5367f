"""SGLang's command for a recipe: flag names and values, memory semantics, parser names per engine, refusals.

Whether SGLang itself accepts the commands is `test_engine_args_sglang.py` (SGLang's own parser).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.capacity.model import GB, RUNTIME_RESERVE_GB_PER_GPU, default_max_num_seqs
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.engine.sglang.command import (
    LAUNCHER,
    POOL_PRIORITY,
    SGLANG_VERSION,
    mem_fraction_static,
    sglang_command,
)
from llm_fabric.engine.vllm.command import engine_command
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog

ROOT = Path(__file__).resolve().parents[2]


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_the_pinned_version_is_the_one_the_makefile_fetches() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["sglang-wheel"] == [f"sglang=={SGLANG_VERSION}"]
    from llm_fabric.kube.options import DEFAULT_SGLANG_IMAGE

    assert DEFAULT_SGLANG_IMAGE.startswith(f"llm-fabric/sglang:v{SGLANG_VERSION}-fabric")


def test_deepseek_v32_on_b200_with_dp_attention_and_ep() -> None:
    recipe = load_recipes()["deepseek-v3.2"]
    gpu = load_gpu_catalog().get("b200")
    cmd = sglang_command(
        ServingArgs(
            recipe,
            gpu=gpu,
            tensor_parallel_size=8,
            attn_dp_size=8,
            ep_size=8,
            kv_cache_dtype="fp8",
            priority_scheduling=True,
            served_model_name="deepseek-v3-2",
        ),
    )
    args = cmd.args
    assert cmd.argv()[:4] == [*LAUNCHER, "--model-path"]
    assert _value(args, "--model-path") == "deepseek-ai/DeepSeek-V3.2"
    assert (_value(args, "--tp-size"), _value(args, "--attn-dp-size"), _value(args, "--ep-size")) == ("8", "8", "8")
    assert _value(args, "--kv-cache-dtype") == "fp8_e4m3"  # the fabric's fp8 in SGLang's spelling
    assert _value(args, "--context-length") == "163840"
    # SGLang's parser names, not vLLM's deepseek_v32 / deepseek_v3
    assert (_value(args, "--tool-call-parser"), _value(args, "--reasoning-parser")) == ("deepseekv32", "deepseek-v3")
    assert "--tokenizer-mode" not in args  # vLLM's DSML switch; SGLang encodes V3.2 itself
    for flag in (
        "--enable-metrics",
        "--enable-cache-report",
        "--enable-priority-scheduling",
        "--schedule-low-priority-values-first",
        "--enable-custom-logit-processor",
    ):
        assert flag in args
    assert _value(args, "--default-priority-value") == str(POOL_PRIORITY)
    assert _value(args, "--max-running-requests") == str(default_max_num_seqs(gpu))
    assert _value(args, "--max-queued-requests") == str(default_max_num_seqs(gpu))
    assert "--gpu-memory-utilization" not in args and "--max-num-seqs" not in args
    # vLLM's kernel switches stay out; the loop guard's settings come in
    assert not [k for k in cmd.env if k.startswith("VLLM_")]
    assert cmd.env["FABRIC_LOOP_GUARD_ENABLED"] == "1"
    assert cmd.request_defaults["max_tokens"] == recipe.generation.max_output_tokens


def test_parser_names_differ_per_engine_where_the_families_do() -> None:
    recipes = load_recipes()
    gpu = load_gpu_catalog().get("h200")
    names = {}
    for rid in ("deepseek-v3.2", "gpt-oss-120b", "kimi-k2.6", "glm-5.1", "qwen3.5", "mistral-small-4"):
        recipe = recipes[rid]
        tp = max(recipe.tensor_parallel_sizes)
        tp = 8 if tp > 8 else tp
        sg = sglang_command(ServingArgs(recipe, gpu=gpu, tensor_parallel_size=tp)).args
        vl = engine_command(ServingArgs(recipe, gpu=gpu, tensor_parallel_size=tp)).args
        names[rid] = tuple(
            a[a.index(f) + 1] if f in a else None
            for a in (vl, sg)
            for f in ("--tool-call-parser", "--reasoning-parser")
        )
    assert names["deepseek-v3.2"] == ("deepseek_v32", "deepseek_v3", "deepseekv32", "deepseek-v3")
    assert names["gpt-oss-120b"] == ("openai", "openai_gptoss", "gpt-oss", "gpt-oss")
    for rid in ("kimi-k2.6", "glm-5.1", "qwen3.5", "mistral-small-4"):  # the families whose names match
        assert names[rid][:2] == names[rid][2:], rid


def test_mem_fraction_static_keeps_the_planned_kv_pool() -> None:
    """vLLM: util x memory = weights + reserve + pool; SGLang: fraction x memory = weights + pool."""
    gpu = load_gpu_catalog().get("h100-sxm")
    fraction = mem_fraction_static(gpu, 0.9)
    vllm_static = 0.9 * gpu.memory_bytes - RUNTIME_RESERVE_GB_PER_GPU * GB
    assert fraction * gpu.memory_bytes <= vllm_static < (fraction + 0.001) * gpu.memory_bytes
    assert fraction < 0.9  # never vLLM's number passed through
    assert mem_fraction_static(gpu, 0.8) < fraction
    with pytest.raises(UsageError, match="no static memory"):
        mem_fraction_static(gpu, 0.05)


def test_refusals_name_the_reason() -> None:
    recipes, catalog = load_recipes(), load_gpu_catalog()
    qwen = recipes["qwen3.5-122b"]
    h200 = catalog.get("h200")
    with pytest.raises(UsageError, match="must divide the tensor-parallel size"):
        sglang_command(ServingArgs(qwen, gpu=h200, tensor_parallel_size=4, attn_dp_size=3))
    with pytest.raises(UsageError, match="not a mixture of experts"):
        sglang_command(ServingArgs(recipes["llama-3.3-70b"], gpu=h200, tensor_parallel_size=4, ep_size=4))
    with pytest.raises(PolicyRefusal):  # the kernel matrix, as for vLLM: FP8 has no kernel on A100
        sglang_command(ServingArgs(qwen, gpu=catalog.get("a100-80gb"), tensor_parallel_size=4, quantization="fp8"))
    with pytest.raises(UsageError, match="max_running_requests"):
        sglang_command(ServingArgs(qwen, gpu=h200, tensor_parallel_size=4, max_num_seqs=0))


def test_a_recipe_without_an_sglang_section_is_refused() -> None:
    recipe = load_recipes()["qwen3.5"].model_copy(update={"sglang": None})
    with pytest.raises(UsageError, match="no `sglang:` section"):
        sglang_command(ServingArgs(recipe, gpu=load_gpu_catalog().get("h200"), tensor_parallel_size=8))


def test_engine_args_cli_prints_sglang_launch_server(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "engine-args",
            "--model",
            "gpt-oss-120b",
            "--gpu",
            "h200",
            "--count",
            "1",
            "--engine",
            "sglang",
            "--priority",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["engine"] == "sglang" and out["argv"][:3] == list(LAUNCHER)
    assert _value(out["args"], "--tool-call-parser") == "gpt-oss"
    assert "--schedule-low-priority-values-first" in out["args"]
    assert main(["engine-args", "--model", "gpt-oss-120b", "--gpu", "h200", "--count", "1", "--ep", "2"]) == 2
    assert "SGLang's" in capsys.readouterr().err
