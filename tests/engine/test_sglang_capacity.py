"""Capacity under SGLang: the same KV pool through --mem-fraction-static, more sessions with DP attention."""

from __future__ import annotations

import json

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.capacity.model import estimate
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.engine.sglang.capacity import sglang_estimate
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog


def test_tp_only_sglang_holds_what_vllm_holds() -> None:
    recipe, gpu = load_recipes()["qwen3.5-122b"], load_gpu_catalog().get("h200")
    vllm = estimate(recipe, gpu, 2, tensor_parallel_size=2, context_tokens=16000)
    sglang = sglang_estimate(recipe, gpu, 2, tensor_parallel_size=2, context_tokens=16000)
    assert sglang.estimate.kv_pool_gb == vllm.kv_pool_gb
    assert sglang.estimate.kv_sessions == vllm.kv_sessions
    assert sglang.estimate.max_concurrency == vllm.max_concurrency
    assert 0.8 < sglang.mem_fraction_static < 0.9


def test_dp_attention_multiplies_mla_sessions() -> None:
    recipe, gpu = load_recipes()["deepseek-v3.2"], load_gpu_catalog().get("b200")
    tp_only = sglang_estimate(recipe, gpu, 8, tensor_parallel_size=8, context_tokens=100_000)
    dp = sglang_estimate(recipe, gpu, 8, tensor_parallel_size=8, attn_dp_size=8, context_tokens=100_000)
    assert (tp_only.kv_copies, dp.kv_copies) == (8, 1)  # every TP rank keeps the latent; a DP rank its own
    assert dp.estimate.kv_pool_gb == tp_only.estimate.kv_pool_gb
    assert dp.estimate.kv_sessions == 8 * tp_only.estimate.kv_sessions
    capped = sglang_estimate(
        recipe, gpu, 8, tensor_parallel_size=8, attn_dp_size=8, context_tokens=1000, max_running_requests=64
    )
    assert capped.estimate.max_concurrency == 64 < capped.estimate.kv_sessions
    with pytest.raises(UsageError, match="must divide"):
        sglang_estimate(recipe, gpu, 8, tensor_parallel_size=8, attn_dp_size=3)


def test_capacity_cli_with_sglang(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "capacity",
        "--model",
        "deepseek-v3.2",
        "--gpu",
        "b200",
        "--count",
        "8",
        "--tp",
        "8",
        "--engine",
        "sglang",
        "--attn-dp",
        "8",
        "--context",
        "100000",
        "--json",
    ]
    assert main(args) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["engine"], row["attn_dp_size"], row["kv_copies"]) == ("sglang", 8, 1)
    assert main(["capacity", "--model", "deepseek-v3.2", "--gpu", "b200", "--count", "8", "--attn-dp", "8"]) == 2
    assert "--attn-dp is SGLang's (add --engine sglang)" in capsys.readouterr().err  # not a misspelt option
