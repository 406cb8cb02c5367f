"""The capacity model on public numbers (seed 002), and its monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fabric.engine.capacity import MAX_NUM_SEQS_LARGE_GPU, default_max_num_seqs, estimate, kv_bytes_per_token
from llm_fabric.engine.recipes import get_recipe, recipe_ids
from llm_fabric.errors import UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog


def gpu(gpu_id: str):  # type: ignore[no-untyped-def]
    return load_gpu_catalog().get(gpu_id)


def test_kv_bytes_per_token_public_numbers() -> None:
    assert kv_bytes_per_token(get_recipe("llama-3.3-70b")) == 327_680  # Llama-3-70B fp16
    assert kv_bytes_per_token(get_recipe("deepseek-v3")) == 70_272  # DeepSeek-V3 bf16 MLA
    assert kv_bytes_per_token(get_recipe("deepseek-v3"), "fp8") == 35_136
    # seed 002: a 128K context of Llama 70B is about 43 GB
    assert 131_072 * kv_bytes_per_token(get_recipe("llama-3.3-70b")) / 1e9 == pytest.approx(42.9, abs=0.1)


def test_seed_002_batching_example_70b_fp8_on_one_h200() -> None:
    est = estimate(get_recipe("llama-3.3-70b"), gpu("h200"), 1, quantization="fp8", context_tokens=3000, users=48)
    assert est.fits
    assert est.decode_tokens_per_s_single == pytest.approx(68, rel=0.06)  # seed: ~68 tok/s
    assert est.decode_tokens_per_s_per_user == pytest.approx(41, rel=0.06)  # seed: ~41 tok/s each
    assert est.decode_tokens_per_s_total == pytest.approx(1970, rel=0.06)  # seed: ~1,970 tok/s
    assert est.max_concurrency >= 48


def test_seed_002_prefill_of_100k_on_8_h100() -> None:
    est = estimate(
        get_recipe("llama-3.3-70b"),
        gpu("h100-sxm"),
        8,
        tensor_parallel_size=8,
        quantization="bf16",
        context_tokens=100_000,
    )
    assert 6.0 <= est.prefill_seconds <= 7.5  # seed: "3 s at perfect use, more like 6-7 in practice"


def test_deepseek_does_not_fit_8_h100_but_fits_8_h200() -> None:
    ds = get_recipe("deepseek-v3")
    h100 = estimate(ds, gpu("h100-sxm"), 8)
    assert not h100.fits and h100.reason is not None and "exceed" in h100.reason
    assert estimate(ds, gpu("h200"), 8).fits


def test_not_native_quantization_is_refused_with_reason() -> None:
    est = estimate(get_recipe("glm-5.1"), gpu("h200"), 8, quantization="nvfp4")
    assert not est.fits and est.reason is not None and "not native on sm_90" in est.reason
    assert estimate(get_recipe("gpt-oss-120b"), gpu("h200"), 1).fits  # weight-only accepted by its recipe


def test_reference_site_placements_fit() -> None:
    cases = [
        ("qwen3.5", "b300", 2, "fp8"),
        ("kimi-k2.6", "b300", 4, "int4"),
        ("deepseek-v3.2", "b200", 8, "fp8"),
        ("glm-5.1", "b300", 2, "nvfp4"),
        ("qwen3.5-122b", "h200", 2, "fp8"),
        ("gpt-oss-120b", "h200", 1, "mxfp4"),
        ("mistral-small-4", "h200", 1, "fp8"),
    ]
    for recipe_id, gpu_id, tp, quant in cases:
        recipe = get_recipe(recipe_id)
        est = estimate(
            recipe,
            gpu(gpu_id),
            tp,
            tensor_parallel_size=tp,
            quantization=quant,
            context_tokens=recipe.architecture.max_context if recipe_id != "glm-5.1" else 202_752,
        )
        assert est.fits, (recipe_id, est.reason)


@settings(max_examples=40, deadline=None)
@given(
    recipe_id=st.sampled_from(recipe_ids()),
    gpu_id=st.sampled_from(["h100-sxm", "h200", "b200", "mi300x", "l40s"]),
    count=st.integers(1, 8),
    context=st.integers(256, 131_072),
)
def test_more_gpus_never_hold_fewer_sessions(recipe_id: str, gpu_id: str, count: int, context: int) -> None:
    recipe, spec = get_recipe(recipe_id), gpu(gpu_id)
    if min(recipe.tensor_parallel_sizes) > count:
        return
    fewer = estimate(recipe, spec, count, context_tokens=context)
    more = estimate(recipe, spec, count + 1, context_tokens=context)
    assert more.max_concurrency >= fewer.max_concurrency


@settings(max_examples=40, deadline=None)
@given(
    recipe_id=st.sampled_from(recipe_ids()),
    gpu_id=st.sampled_from(["h200", "b200", "b300"]),
    count=st.sampled_from([1, 2, 4, 8]),
    context=st.integers(256, 100_000),
    extra=st.integers(1, 60_000),
)
def test_longer_context_never_holds_more(recipe_id: str, gpu_id: str, count: int, context: int, extra: int) -> None:
    recipe, spec = get_recipe(recipe_id), gpu(gpu_id)
    if min(recipe.tensor_parallel_sizes) > count:
        return
    short = estimate(recipe, spec, count, context_tokens=context)
    long = estimate(recipe, spec, count, context_tokens=context + extra)
    assert long.max_concurrency <= short.max_concurrency
    # at the same TP; a longer context may pick a larger TP (when max-num-seqs caps the smaller one's
    # sessions), whose single stream is faster
    if short.fits and long.fits and short.tensor_parallel_size == long.tensor_parallel_size:
        assert long.decode_tokens_per_s_single <= short.decode_tokens_per_s_single


def test_max_num_seqs_caps_the_sessions_a_replica_runs() -> None:
    """gpt-oss-120b on one H200 at seed 000's p50 (193 tokens): the KV pool holds thousands, vLLM runs 1,024."""
    recipe, h200 = get_recipe("gpt-oss-120b"), gpu("h200")
    est = estimate(recipe, h200, 1, context_tokens=193, users=3000)
    assert est.kv_sessions > 2 * MAX_NUM_SEQS_LARGE_GPU and est.max_num_seqs == MAX_NUM_SEQS_LARGE_GPU
    assert est.max_concurrency == MAX_NUM_SEQS_LARGE_GPU
    assert est.replicas_needed == 3  # 3,000 users at 1,024 a replica
    per_user = est.decode_tokens_per_s_per_user
    assert est.decode_tokens_per_s_total == pytest.approx(per_user * MAX_NUM_SEQS_LARGE_GPU, rel=1e-3)
    wider = estimate(recipe, h200, 1, context_tokens=193, users=3000, max_num_seqs=1 << 20)
    assert wider.max_concurrency == wider.kv_sessions == est.kv_sessions
    two = estimate(recipe, h200, 2, tensor_parallel_size=1, context_tokens=193, max_num_seqs=100)
    assert two.max_concurrency == 200 and two.max_num_seqs == 100  # per replica, summed over replicas
    long = estimate(recipe, h200, 1, context_tokens=131_072)
    assert long.max_concurrency == long.kv_sessions < MAX_NUM_SEQS_LARGE_GPU  # the KV pool is the limit there
    with pytest.raises(UsageError, match="at least 1"):
        estimate(recipe, h200, 1, max_num_seqs=0)


@pytest.mark.parametrize(
    ("gpu_id", "seqs"),
    [
        ("h100-sxm", 1024),
        ("h200", 1024),
        ("b300", 1024),
        ("mi300x", 1024),
        ("a100-80gb", 256),
        ("a100-40gb", 256),
        ("l40s", 256),
    ],
)
def test_default_max_num_seqs_is_vllms(gpu_id: str, seqs: int) -> None:
    """vLLM 0.32 EngineArgs.get_batch_defaults: 1,024 from 70 GiB up unless the name says A100, else 256."""
    assert default_max_num_seqs(gpu(gpu_id)) == seqs
