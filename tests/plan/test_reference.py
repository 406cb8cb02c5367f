"""The reference federation (seed 000) plans to the layout it runs in production."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.plan.planning import plan_site
from llm_fabric.site.loader import load_site


def test_reference_layout(site_repo: Path) -> None:
    plan = plan_site(load_site(site_repo))
    assert plan.complete and plan.solver.status == "optimal"
    shape = sorted((r.deployment, r.site, r.node, r.gpu_model, r.tensor_parallel_size) for r in plan.replicas)
    assert shape == [
        ("deepseek-v3-2", "brno", "dgx-b200-01", "b200", 8),
        ("glm-5-1", "brno", "dgx-b300-01", "b300", 2),
        ("gpt-oss-120b", "brno", "hgx-h200-ceitec", "h200", 1),
        ("gpt-oss-120b", "vienna", "hgx-h100-tuwien", "h100-sxm", 1),
        ("kimi-k2-6", "brno", "dgx-b300-01", "b300", 4),
        ("mistral-small-4", "brno", "hgx-h200-ceitec", "h200", 1),
        ("qwen3-5", "brno", "dgx-b300-01", "b300", 2),
        ("qwen3-5-122b", "brno", "hgx-h200-ceitec", "h200", 2),
    ]
    # no GPU is given twice
    seats = Counter((r.node, g) for r in plan.replicas for g in r.gpu_indices)
    assert max(seats.values()) == 1 and len(seats) == 21
    dedicated = [r for r in plan.replicas if r.dedicated_for]
    assert [(r.deployment, r.dedicated_for) for r in dedicated] == [("qwen3-5-122b", "ceitec-structural")]
    assert "--scheduling-policy" in " ".join(dedicated[0].engine_args)
    ceitec = plan.owners["ceitec-structural"]
    assert (ceitec.contributed_gpus, ceitec.dedicated_gpus, ceitec.lent_gpus) == (4, 2, 2)
    assert plan.sites["brno"].gpus_free == 0
    # Vienna (AT) has GPUs free, but a deployment that serves sensitive data may run only in CZ
    assert plan.sites["vienna"].gpus_free == 7
    site = load_site(site_repo)
    abroad = {r.deployment for r in plan.replicas if r.site == "vienna"}
    assert abroad == {"gpt-oss-120b"} and "sensitive" not in site.deployments["gpt-oss-120b"].data_classes
    # sensitive data is never logged
    assert not plan.deployments["kimi-k2-6"].prompt_logging
    assert plan.deployments["deepseek-v3-2"].max_concurrency_p95 < plan.deployments["deepseek-v3-2"].max_concurrency_p50


def test_plan_cli_markdown_and_json(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(site_repo), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## fabric plan: `cerit-sc` (complete)")
    assert "| kimi-k2-6 | 0 | dgx-b300-01 GPUs 0,1,2,3 (4xb300) | int4 | pool | brno |" in md
    assert main(["plan", str(site_repo), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["apiVersion"] == "llm-fabric/v1" and data["kind"] == "Plan"
    assert not data["shortfalls"] and not data["violations"] and len(data["replicas"]) == 8


def test_the_plan_caps_concurrency_at_the_engines_max_num_seqs(site_repo: Path) -> None:
    """gpt-oss-120b (p50 193 tokens): the H200 replica's KV pool holds far more sessions than vLLM runs.

    The H100 replica in Vienna has less KV room (619 sessions at p50): the deployment admits 1024 + 619.
    """
    plan = plan_site(load_site(site_repo))
    [replica] = [r for r in plan.replicas if r.deployment == "gpt-oss-120b" and r.gpu_model == "h200"]
    assert replica.engine_args[replica.engine_args.index("--max-num-seqs") + 1] == "1024"
    assert plan.deployments["gpt-oss-120b"].max_concurrency_p50 == 1024 + 619
    path = site_repo / "deployments" / "gpt-oss-120b.yaml"
    path.write_text(path.read_text() + "max_num_seqs: 256\n")
    plan = plan_site(load_site(site_repo))
    replicas = [r for r in plan.replicas if r.deployment == "gpt-oss-120b"]
    assert [r.engine_args[r.engine_args.index("--max-num-seqs") + 1] for r in replicas] == ["256", "256"]
    figures = plan.deployments["gpt-oss-120b"]
    assert figures.max_concurrency_p50 == 2 * 256
