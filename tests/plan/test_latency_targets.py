"""A deployment's latency target: a replica counts only the sessions it serves within it, so the plan
places more replicas for the same sessions; the layout choice follows the target."""

from __future__ import annotations

from llm_fabric.plan.planning import plan_site
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import ContextProfile, Deployment, Target
from tests.plan.onesite import federation, node


def _site(target: Target, recipe: str = "llama-3.3-70b", gpu: str = "h200", nodes: int = 6) -> SiteRepo:
    dep = Deployment(
        name="chat", recipe=recipe, target=target, context=ContextProfile(p50=2000, p95=8000), data_classes=["public"]
    )
    return federation([node(f"n{i}", gpu) for i in range(nodes)], dep)


def test_an_itl_target_needs_more_replicas_than_the_kv_pool_alone() -> None:
    free = plan_site(_site(Target(concurrent_sessions=600, context_tokens=8000), nodes=10), time_limit_s=2)
    strict = plan_site(_site(Target(concurrent_sessions=600, context_tokens=8000, itl_ms=30), nodes=10), time_limit_s=2)
    assert free.complete and strict.complete, [s.reasons for s in strict.shortfalls]
    gpus = lambda plan: sum(r.gpus for r in plan.replicas)  # noqa: E731
    assert gpus(strict) > gpus(free)
    capacity = strict.deployments["chat"]
    assert capacity.max_concurrency_target is not None and capacity.max_concurrency_target >= 600
    assert capacity.expected is not None and capacity.expected.error_band is not None


def test_an_unreachable_target_is_a_shortfall_that_says_why() -> None:
    plan = plan_site(_site(Target(concurrent_sessions=10, context_tokens=8000, itl_ms=0.5)), time_limit_s=2)
    assert not plan.replicas and not plan.complete
    assert "even one session misses ITL <= 0.5 ms" in " ".join(plan.shortfalls[0].reasons)


def test_deepseek_sessions_on_b200_take_data_parallel_attention() -> None:
    """Seed 002's case in a site repo: 300 sessions of 100k DeepSeek tokens on DGX B200 nodes."""
    site = _site(Target(concurrent_sessions=300, context_tokens=100_000), recipe="deepseek-v3", gpu="b200")
    plan = plan_site(site, time_limit_s=2)
    assert plan.complete, [s.reasons for s in plan.shortfalls]
    assert {r.parallelism for r in plan.replicas} == {"dp-ep"} and len(plan.replicas) == 5
    args = plan.replicas[0].engine_args
    assert args[args.index("--data-parallel-size") + 1] == "8" and "--enable-expert-parallel" in args
