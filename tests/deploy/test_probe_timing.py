"""The liveness probe's deadline, period and threshold, from the plan's speed figures (deploy.resources.probes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.deploy.build import build_stack, load_inputs
from llm_fabric.engine.backends import backend
from llm_fabric.init import init_site
from llm_fabric.kube.manifests import all_objects
from llm_fabric.kube.options import StackOptions
from llm_fabric.plan.document import DeploymentCapacity, SpeedFigures
from llm_fabric.plan.planning import plan_site
from llm_fabric.serving.probes import (
    DEADLINE_MAX_S,
    DEADLINE_MIN_S,
    DEADLINE_NO_FIGURES_S,
    LIVE_TOKENS,
    SILENCE_S,
    liveness_timing,
)
from llm_fabric.trust.sites import load_trusted_site


def capacity(ttft_ms: float, itl_ms: float, context_p50: int = 4096, expected: bool = True) -> DeploymentCapacity:
    speed = SpeedFigures(
        output_tokens_per_s_total=1000, output_tokens_per_s_per_user=20, itl_ms=itl_ms, ttft_ms=ttft_ms
    )
    return DeploymentCapacity(
        deployment="d",
        recipe="qwen3.5",
        quantization="fp8",
        replicas_wanted=1,
        replicas_planned=1,
        context_p50=context_p50,
        context_p95=4 * context_p50,
        weights_gb=10,
        kv_pool_gb=10,
        max_concurrency_p50=8,
        max_concurrency_p95=2,
        decode_tokens_per_s_single=100,
        decode_tokens_per_s_per_user=20,
        decode_tokens_per_s_total=160,
        expected=speed if expected else None,
        ceiling=speed,
        engine_summary="",
        data_classes=["public"],
        prompt_logging=True,
        external_fallback=False,
        met=True,
    )


def test_the_deadline_leaves_room_for_a_full_context_prefill() -> None:
    # 800 ms to the first token at the p50 context of 4K; a 128K prompt ahead of the probe takes 32 times that
    timing = liveness_timing(capacity(ttft_ms=800, itl_ms=50), max_model_len=131072)
    assert timing.prefill_room_s == pytest.approx(25.6)
    assert timing.decode_s == pytest.approx(LIVE_TOKENS * 0.05)
    assert timing.deadline_s == 52  # 2 x (25.6 + 0.2), rounded up
    assert (timing.timeout_s, timing.period_s, timing.failure_threshold) == (57, 60, 5)
    assert timing.source == "expected"
    shorter = liveness_timing(capacity(ttft_ms=800, itl_ms=50), max_model_len=8192)
    assert shorter.deadline_s < timing.deadline_s


def test_the_deadline_is_bounded_and_the_restart_waits_for_real_silence() -> None:
    assert liveness_timing(capacity(ttft_ms=10, itl_ms=5), max_model_len=4096).deadline_s == DEADLINE_MIN_S
    slow = liveness_timing(capacity(ttft_ms=20000, itl_ms=200), max_model_len=1 << 20)
    assert slow.deadline_s == DEADLINE_MAX_S and slow.period_s == DEADLINE_MAX_S + 5
    unknown = liveness_timing(None, None)
    assert (unknown.deadline_s, unknown.source) == (DEADLINE_NO_FIGURES_S, "none")
    ceiling_only = liveness_timing(capacity(ttft_ms=800, itl_ms=50, expected=False), None)
    assert ceiling_only.source == "ceiling"
    for timing in (slow, unknown, ceiling_only):
        assert timing.silence_s >= SILENCE_S  # failing probes for five minutes in a row before a restart
        assert timing.period_s >= timing.timeout_s  # one probe at a time
        assert timing.failure_threshold >= 2


def test_every_rendered_replica_carries_its_plans_timing(tmp_path: Path) -> None:
    root = init_site(tmp_path / "site", "cerit-sc").root
    site = load_trusted_site(root)
    plan = plan_site(site)  # the planner's own plan, with its speed figures
    inputs = load_inputs(StackOptions(site_repo=root, site="brno"), site=site, plan=plan)
    workloads = [o for o in all_objects(build_stack("serving", inputs)) if o["kind"] == "Deployment"]
    replicas = {(r.deployment, r.index): r for r in plan.replicas}
    seen, deadlines = 0, set()
    for workload in workloads:
        labels = workload["metadata"]["labels"]
        if "fabric.llm/replica" not in labels:
            continue
        deployment = labels["fabric.llm/deployment"]
        replica = replicas[(deployment, int(labels["fabric.llm/replica"].rsplit("-", 1)[1]))]
        length = backend(replica.engine).planned_config(replica.engine_args)["max_model_len"]
        assert isinstance(length, int)
        timing = liveness_timing(plan.deployments[deployment], length)
        assert timing.source == "expected"
        deadlines.add(timing.deadline_s)
        probe = workload["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
        command = probe["exec"]["command"]
        assert command[command.index("--deadline") + 1] == str(timing.deadline_s)
        assert (probe["periodSeconds"], probe["failureThreshold"]) == (timing.period_s, timing.failure_threshold)
        seen += 1
    assert seen == len([r for r in plan.replicas if r.site == "brno"])
    assert len(deadlines) > 1  # each deployment's own figures, not one number for all
