"""`vllm serve` arguments: the flags vLLM knows, the kernel environment, refusals; the CLI around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.local.server import cpu_stand_in_args, cpu_stand_in_env
from llm_fabric.engine.loop_guard_config import PLUGIN_CLASS, loop_guard_flags
from llm_fabric.engine.recipes import get_recipe
from llm_fabric.engine.vllm.command import engine_command
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_kimi_on_b300() -> None:
    cmd = engine_command(
        ServingArgs(get_recipe("kimi-k2.6"), gpu=load_gpu_catalog().get("b300"), tensor_parallel_size=4)
    )
    assert cmd.args[0] == "moonshotai/Kimi-K2.6"
    assert _value(cmd.args, "--tensor-parallel-size") == "4"
    assert _value(cmd.args, "--tool-call-parser") == "kimi_k2" and "--enable-auto-tool-choice" in cmd.args
    assert _value(cmd.args, "--reasoning-parser") == "kimi_k2" and "--trust-remote-code" in cmd.args
    assert json.loads(_value(cmd.args, "--override-generation-config")) == {"max_new_tokens": 32768}
    assert "--quantization" not in cmd.args  # read from the checkpoint's config
    assert cmd.env["VLLM_USE_FLASHINFER_MOE_FP4"] == "1"
    assert "--scheduling-policy" not in cmd.args


def test_dedicated_glm_with_presence_penalty_and_fp8_kv() -> None:
    cmd = engine_command(
        ServingArgs(
            get_recipe("glm-5.1"),
            gpu=load_gpu_catalog().get("b300"),
            tensor_parallel_size=2,
            quantization="nvfp4",
            kv_cache_dtype="fp8",
            max_model_len=131072,
            priority_scheduling=True,
        ),
    )
    assert _value(cmd.args, "--scheduling-policy") == "priority"
    assert _value(cmd.args, "--kv-cache-dtype") == "fp8"
    assert _value(cmd.args, "--max-model-len") == "131072"
    # vLLM ignores presence_penalty in --override-generation-config; the gateway injects it
    assert "presence_penalty" not in _value(cmd.args, "--override-generation-config")
    assert cmd.request_defaults["presence_penalty"] == 0.5


def test_refusals() -> None:
    catalog = load_gpu_catalog()
    with pytest.raises(PolicyRefusal, match="not native on sm_90"):
        engine_command(
            ServingArgs(get_recipe("glm-5.1"), gpu=catalog.get("h200"), tensor_parallel_size=8, quantization="nvfp4")
        )
    with pytest.raises(UsageError, match="tensor-parallel size 3"):
        engine_command(ServingArgs(get_recipe("llama-3.3-70b"), gpu=catalog.get("h200"), tensor_parallel_size=3))
    with pytest.raises(UsageError, match="exceeds"):
        engine_command(
            ServingArgs(
                get_recipe("gpt-oss-120b"), gpu=catalog.get("h200"), tensor_parallel_size=1, max_model_len=1_000_000
            )
        )


def test_cli_capacity_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--model", "deepseek-v3", "--gpu", "b200", "--count", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in (
        "weights_gb",
        "kv_bytes_per_token",
        "kv_pool_gb",
        "max_concurrency",
        "replicas_needed",
        "decode_tokens_per_s_single",
        "decode_tokens_per_s_per_user",
        "decode_tokens_per_s_total",
        "prefill_seconds",
        "fits",
        "reason",
    ):
        assert key in data
    assert main(["capacity", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--count", "8"]) == 3
    assert main(["capacity", "--model", "deepseek-v3", "--gpu", "h100", "--count", "8"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_cli_engine_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine-args", "--model", "gpt-oss-120b", "--gpu", "h200", "--count", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["argv"][:3] == ["vllm", "serve", "openai/gpt-oss-120b"]
    assert _value(data["args"], "--reasoning-parser") == "openai_gptoss"
    assert main(["engine-args", "--model", "glm-5.1", "--gpu", "h200", "--count", "8", "--quantization", "nvfp4"]) == 3


def test_every_engine_command_loads_the_loop_guard_with_its_recipe_settings() -> None:
    catalog = load_gpu_catalog()
    kimi = engine_command(ServingArgs(get_recipe("kimi-k2.6"), gpu=catalog.get("b300"), tensor_parallel_size=4))
    assert _value(kimi.args, "--logits-processors") == PLUGIN_CLASS
    assert kimi.args.count("--logits-processors") == 1
    # Kimi's override in engine/plugins/loop_guard.yaml (min_span 48) reaches the engine environment
    assert kimi.env["FABRIC_LOOP_GUARD_MIN_SPAN"] == "48" and kimi.env["FABRIC_LOOP_GUARD_ENABLED"] == "1"
    assert kimi.env["VLLM_USE_FLASHINFER_MOE_FP4"] == "1"  # the kernel matrix's env is kept beside it
    llama = engine_command(ServingArgs(get_recipe("llama-3.3-70b"), gpu=catalog.get("h200"), tensor_parallel_size=4))
    assert llama.env["FABRIC_LOOP_GUARD_MIN_SPAN"] == "64"  # the defaults
    assert {k: v for k, v in llama.env.items() if k.startswith("FABRIC_")} == loop_guard_flags("llama-3.3-70b").env
    bare = engine_command(
        ServingArgs(get_recipe("llama-3.3-70b"), gpu=catalog.get("h200"), tensor_parallel_size=4, loop_guard=False)
    )
    assert "--logits-processors" not in bare.args and not any(k.startswith("FABRIC_") for k in bare.env)


def test_the_cpu_stand_in_keeps_the_guard_and_drops_gpu_kernel_env() -> None:
    recipe = get_recipe("kimi-k2.6")
    cmd = engine_command(ServingArgs(recipe, gpu=load_gpu_catalog().get("b300"), tensor_parallel_size=4))
    args = cpu_stand_in_args(cmd.args, served_name=recipe.id)
    assert _value(args, "--logits-processors") == PLUGIN_CLASS
    assert cpu_stand_in_env(cmd.env) == loop_guard_flags(recipe.id).env


def test_max_num_seqs_is_always_explicit_and_dropped_for_the_cpu_stand_in() -> None:
    recipe, catalog = get_recipe("gpt-oss-120b"), load_gpu_catalog()
    assert (
        _value(
            engine_command(ServingArgs(recipe, gpu=catalog.get("h200"), tensor_parallel_size=1)).args, "--max-num-seqs"
        )
        == "1024"
    )
    assert (
        _value(
            engine_command(ServingArgs(recipe, gpu=catalog.get("rtx-pro-6000"), tensor_parallel_size=1)).args,
            "--max-num-seqs",
        )
        == "1024"
    )
    chosen = engine_command(ServingArgs(recipe, gpu=catalog.get("h200"), tensor_parallel_size=1, max_num_seqs=96))
    assert _value(chosen.args, "--max-num-seqs") == "96"
    assert "--max-num-seqs" not in cpu_stand_in_args(chosen.args, served_name=recipe.id)
    with pytest.raises(UsageError, match="max_num_seqs"):
        engine_command(ServingArgs(recipe, gpu=catalog.get("h200"), tensor_parallel_size=1, max_num_seqs=0))


def test_cli_max_num_seqs(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "gpt-oss-120b", "--gpu", "h200", "--count", "1"]
    assert main(["engine-args", *args, "--max-num-seqs", "300", "--json"]) == 0
    assert _value(json.loads(capsys.readouterr().out)["args"], "--max-num-seqs") == "300"
    assert main(["capacity", *args, "--context", "193", "--max-num-seqs", "300", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["max_num_seqs"], data["max_concurrency"]) == (300, 300) and data["kv_sessions"] > 300
    assert main(["capacity", *args, "--context", "193"]) == 0
    out = capsys.readouterr().out
    assert "max-num-seqs per replica" in out and "sessions the KV pool holds" in out


def test_cli_capacity_of_a_site(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every deployment at its p95 context; with a small max_num_seqs the KV pool's figure is shown beside it."""
    assert main(["capacity", "--site", str(site_repo), "--json"]) == 0
    rows = {r["deployment"]: r for r in json.loads(capsys.readouterr().out)}
    gpt = rows["gpt-oss-120b"]
    assert (gpt["context_tokens"], gpt["max_concurrency"], gpt["kv_sessions"]) == (2842, 605, 605)
    assert all(r["fits"] for r in rows.values()) and len(rows) == 7
    path = site_repo / "deployments" / "gpt-oss-120b.yaml"
    path.write_text(path.read_text() + "max_num_seqs: 64\n")
    assert main(["capacity", "--site", str(site_repo)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "gpt-oss-120b" in x)
    assert "64 (KV 605)" in line


def test_cli_capacity_json_speaks_ceiling_and_expected(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["capacity", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--count", "16", "--json"]
    assert main([*base, "--input-tokens", "1000", "--output-tokens", "1000", "--users", "max"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["nodes"], data["gpus_per_node"], data["replica_gpus"]) == (2, 8, 16)
    assert data["users"] == data["max_concurrency"] and data["users_max"]
    figures = {"output_tokens_per_s_total", "output_tokens_per_s_per_user", "itl_ms", "ttft_ms"}
    assert figures <= set(data["ceiling"]) and figures | {"error_band"} <= set(data["expected"])
    assert data["expected"]["output_tokens_per_s_total"] < data["ceiling"]["output_tokens_per_s_total"]
    assert {s["strategy"] for s in data["strategies"]} == {"tp", "dp-ep"} and data["strategy"] in ("tp", "dp-ep")
    assert main([*base, "--gpus-per-node", "16", "--tp", "16", "--parallelism", "tp"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == 1
    llama = ["capacity", "--model", "llama-3.3-70b", "--gpu", "h200", "--count", "8"]
    assert (
        main([*llama, "--input-tokens", "2000", "--output-tokens", "500", "--users", "400", "--itl-ms", "40", "--json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["latency_target"] == {"itl_ms": 40.0, "ttft_ms": None}
    assert data["concurrency_at_target"] and data["replicas_at_target"] >= data["replicas_needed"]
    assert main([*llama, "--users", "max"]) == 0
    out = capsys.readouterr().out
    assert "ceiling: output tok/s total" in out and "expected: output tok/s total" in out and "error band" in out
    assert main([*llama, "--parallelism", "dp-ep"]) == 2
    assert "does not support parallelism" in capsys.readouterr().err
    assert main([*llama, "--users", "many"]) == 2
    assert "`many` is neither a number of sessions nor `max`" in capsys.readouterr().err  # not any usage error
