"""The capacity model on public numbers (seed 002), and its monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fabric.engine.capacity.model import MAX_NUM_SEQS_LARGE_GPU, default_max_num_seqs, estimate, kv_bytes_per_token
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


def test_seed_002_300_deepseek_sessions_of_100k_on_dgx_b200_with_dp_attention() -> None:
    """Seed 002: 300 sessions x 100k tokens, ~0.55 TB of KV per DGX B200 -> "roughly 4 nodes".

    Tensor parallelism keeps the MLA latent on all 8 ranks (12 sessions a node, 25 nodes); data-parallel
    attention keeps it once: 9 sessions on each of 8 ranks (each rank's own 70.2 GB pool holds 9.99 of
    7.03 GB), 72 a node, so 300 sessions are 4.2 nodes' worth: 5 whole replicas.
    """
    recipe, b200 = get_recipe("deepseek-v3"), gpu("b200")
    tp = estimate(recipe, b200, 8, context_tokens=100_000, users=300, parallelism="tp")
    assert (tp.max_concurrency, tp.replicas_needed) == (12, 25)
    est = estimate(recipe, b200, 8, context_tokens=100_000, users=300)
    assert est.strategy == "dp-ep" and est.data_parallel_size == 8 and est.expert_parallel
    assert est.kv_pool_gb == pytest.approx(562, abs=2)  # the seed's ~0.55 TB of KV per node
    assert est.max_concurrency == 72
    assert 4 <= 300 / est.max_concurrency <= 4.5 and est.replicas_needed == 5
    # an fp8 KV cache (which the recipe offers) halves each session: 2 nodes
    assert estimate(recipe, b200, 8, context_tokens=100_000, users=300, kv_cache_dtype="fp8").replicas_needed == 2
    assert {s.strategy for s in est.strategies} == {"tp", "dp-ep"}


def test_a_16_gpu_h100_replica_spans_two_nodes_and_tensor_parallel_stays_in_one() -> None:
    recipe, h100 = get_recipe("deepseek-v3"), gpu("h100-sxm")
    est = estimate(recipe, h100, 16, parallelism="tp")
    assert est.fits and (est.nodes, est.gpus_per_node, est.replica_gpus) == (2, 8, 16)
    assert (est.tensor_parallel_size, est.pipeline_parallel_size) == (8, 2)
    dp = estimate(recipe, h100, 16, parallelism="dp-ep")
    assert dp.fits and (dp.nodes, dp.data_parallel_size, dp.tensor_parallel_size) == (2, 16, 1)
    with pytest.raises(UsageError, match="stays inside a node"):
        estimate(recipe, h100, 16, tensor_parallel_size=16)
    # a 16-GPU node (as an operator says with --gpus-per-node) holds TP 16 in one node
    wide = estimate(recipe, h100, 16, tensor_parallel_size=16, gpus_per_node=16)
    assert wide.fits and wide.nodes == 1 and wide.tensor_parallel_size == 16
    # 8 GPUs are one node: no multi-node replica, the weights do not fit
    assert not estimate(recipe, h100, 8).fits


def test_a_latency_target_gives_the_concurrency_and_the_replicas_that_meet_it() -> None:
    from llm_fabric.engine.capacity.model import LatencyTarget

    recipe, h200 = get_recipe("llama-3.3-70b"), gpu("h200")
    kwargs = {"input_tokens": 2000, "output_tokens": 500, "users": 500, "tensor_parallel_size": 8}
    free = estimate(recipe, h200, 8, **kwargs)  # type: ignore[arg-type]
    strict = estimate(recipe, h200, 8, latency_target=LatencyTarget(itl_ms=30), **kwargs)  # type: ignore[arg-type]
    loose = estimate(recipe, h200, 8, latency_target=LatencyTarget(itl_ms=80), **kwargs)  # type: ignore[arg-type]
    assert strict.concurrency_at_target is not None and loose.concurrency_at_target is not None
    assert strict.concurrency_at_target < loose.concurrency_at_target <= free.max_concurrency
    assert strict.replicas_at_target is not None and loose.replicas_at_target is not None
    assert strict.replicas_at_target > loose.replicas_at_target >= free.replicas_needed
    impossible = estimate(recipe, h200, 8, latency_target=LatencyTarget(itl_ms=1), **kwargs)  # type: ignore[arg-type]
    assert impossible.concurrency_at_target is None and "even one session misses" in (impossible.target_reason or "")


def test_users_max_answers_for_every_admitted_session() -> None:
    est = estimate(get_recipe("llama-3.3-70b"), gpu("h200"), 1, input_tokens=1000, output_tokens=1000, users="max")
    assert est.users == est.max_concurrency and est.users_max and est.replicas_needed == 1
    assert est.expected is not None and est.expected.output_tokens_per_s_total > 1000


def test_dp_ep_needs_a_recipe_that_offers_it() -> None:
    with pytest.raises(UsageError, match="does not support parallelism"):
        estimate(get_recipe("llama-3.3-70b"), gpu("h200"), 8, parallelism="dp-ep")


@settings(max_examples=30, deadline=None)
@given(
    gpu_id=st.sampled_from(["h200", "b200", "b300", "mi300x"]),
    count=st.sampled_from([8, 16, 24]),
    context=st.integers(1024, 131_072),
    extra=st.integers(1, 30_000),
)
def test_dp_ep_longer_context_never_holds_more(gpu_id: str, count: int, context: int, extra: int) -> None:
    recipe, spec = get_recipe("deepseek-v3"), gpu(gpu_id)
    short = estimate(recipe, spec, count, context_tokens=context, parallelism="dp-ep")
    long = estimate(recipe, spec, count, context_tokens=context + extra, parallelism="dp-ep")
    assert long.max_concurrency <= short.max_concurrency
