"""`fabric bench --emit inference-perf`: the planner's own plan in, inference-perf configs out.

The chain is the real commands (`fabric plan -o`, then `fabric bench`); each file must load back
into the schema mirror (upstream's models forbid unknown keys, so ours do) unchanged, and carry the
plan's numbers: rates from its throughput, prompt lengths that inference-perf's moment matching
turns back into the plan's p50 and p95, the engine and model the replicas run.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.cli.main import main
from llm_fabric.loadtest.from_plan import STAGE_SHARES
from llm_fabric.loadtest.inference_perf import Distribution, InferencePerfConfig
from llm_fabric.plan.document import Plan, load_plan
from tests.fixtures.gateway_site import edit_yaml, make_gateway_plan, make_gateway_site

PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
Z95 = 1.6448536269514722


def run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(args)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Plan, Path]:
    root = tmp_path_factory.mktemp("bench")
    repo = make_gateway_site(root / "site")  # cerit-sc: two sites, a gateway at each
    plan_file = make_gateway_plan(repo, root)
    return repo, load_plan(plan_file), plan_file


def emit(repo: Path, plan_file: Path, out: Path, *extra: str) -> list[dict[str, Any]]:
    base = ["bench", "-C", str(repo), "--emit", "inference-perf", "--plan", str(plan_file), "--site", "brno"]
    code, text = run([*base, "--prometheus", PROMETHEUS, "--out", str(out), "--json", *extra])
    assert code == 0, text
    written: list[dict[str, Any]] = json.loads(text)
    return written


def loaded(path: Path) -> InferencePerfConfig:
    data = yaml.safe_load(path.read_text())
    config = InferencePerfConfig.model_validate(data)
    assert config.model_dump(mode="json", exclude_none=True) == data  # the file is the model, nothing else
    return config


def median_and_p95(dist: Distribution) -> tuple[float, float]:
    """What inference-perf's sampler makes of a lognormal's mean and std_dev (utils/numeric/distribution)."""
    sigma_sq = math.log(1 + (dist.std_dev / dist.mean) ** 2)
    mu = math.log(dist.mean) - sigma_sq / 2
    return math.exp(mu), math.exp(mu + Z95 * math.sqrt(sigma_sq))


def test_each_deployment_gets_a_config_with_the_plans_numbers(planned: tuple[Path, Plan, Path], tmp_path: Path) -> None:
    repo, plan, plan_file = planned
    written = emit(repo, plan_file, tmp_path)
    assert [w["deployment"] for w in written] == ["qwen3-5", "qwen3-5-122b"]  # those with replicas at brno
    for entry in written:
        name = entry["deployment"]
        cap = plan.deployments[name]
        replicas = [r for r in plan.replicas_of(name) if r.site == "brno"]
        config = loaded(Path(entry["file"]))
        # load: the planned output rate of the site's replicas over the tokens a request, then 25..125 %
        assert cap.expected is not None and entry["source"] == "expected, calibrated"
        share = len(replicas) / cap.replicas_planned
        assert entry["output_tokens_per_s"] == round(cap.expected.output_tokens_per_s_total * share, 1)
        rate = cap.expected.output_tokens_per_s_total * share / entry["output_tokens"]
        assert [s.rate for s in config.load.stages] == [round(rate * s, 3) for s in STAGE_SHARES]
        assert {s.duration for s in config.load.stages} == {180} and config.load.type == "poisson"
        # server: the engine, the served name and the checkpoint the replicas run
        args = replicas[0].engine_args
        assert config.server.type == replicas[0].engine == "vllm"
        assert config.server.model_name == args[args.index("--served-model-name") + 1]
        assert config.server.base_url == f"http://{name}.llm-fabric.svc.cluster.local"
        assert config.tokenizer.pretrained_model_name_or_path == args[0]
        # prompts: one shared system prompt of half the p50; with the question, the plan's p50 and p95
        prefix = config.data.shared_prefix
        assert prefix is not None and config.data.type == "shared_prefix" and prefix.num_unique_system_prompts == 1
        assert prefix.system_prompt_len == cap.context_p50 // 2
        p50, p95 = median_and_p95(prefix.question_len)
        assert prefix.system_prompt_len + p50 == pytest.approx(cap.context_p50, rel=1e-4)
        assert prefix.system_prompt_len + p95 == pytest.approx(cap.context_p95, rel=1e-4)
        assert prefix.output_len.type == "fixed" and prefix.output_len.mean == entry["output_tokens"]
        # the engines' series of this deployment at this site
        assert config.metrics.prometheus.filters == ['namespace="llm-fabric"', f'deployment="{name}"', 'site="brno"']
        assert config.metrics.prometheus.url == PROMETHEUS
        assert "api_key" not in Path(entry["file"]).read_text()


def test_synthetic_prompts_and_the_gateway(planned: tuple[Path, Plan, Path], tmp_path: Path) -> None:
    repo, plan, plan_file = planned
    written = emit(
        repo, plan_file, tmp_path, "--via", "gateway", "--data", "synthetic", "--api", "completion",
        "--deployment", "qwen3-5", "--stage-seconds", "60",
    )  # fmt: skip
    cap = plan.deployments["qwen3-5"]
    config = loaded(Path(written[0]["file"]))
    assert (config.api.type, config.api.streaming) == ("completion", True)
    # the gateway routes to the replicas of every site: the whole deployment's rate, its model group's name
    assert cap.expected is not None and written[0]["output_tokens_per_s"] == round(
        cap.expected.output_tokens_per_s_total, 1
    )
    assert (config.server.base_url, config.server.model_name) == (
        "http://fabric-gateway.llm-fabric.svc.cluster.local",
        "qwen3-5",
    )
    assert (
        'inference-perf -c inference-perf-qwen3-5.yaml --server.api_key "$KEY"' in Path(written[0]["file"]).read_text()
    )
    assert config.data.input_distribution is not None and config.data.shared_prefix is None
    assert median_and_p95(config.data.input_distribution) == (
        pytest.approx(cap.context_p50, rel=1e-4),
        pytest.approx(cap.context_p95, rel=1e-4),
    )
    assert {s.duration for s in config.load.stages} == {60}
    assert 'site="brno"' not in config.metrics.prometheus.filters


def test_what_cannot_be_benchmarked_is_refused(planned: tuple[Path, Plan, Path], tmp_path: Path) -> None:
    repo, _, plan_file = planned
    base = ["bench", "-C", str(repo), "--emit", "inference-perf", "--plan", str(plan_file)]
    common = ["--prometheus", PROMETHEUS, "--out", str(tmp_path)]
    code, text = run([*base, *common])
    assert code == 2 and "2 sites" in text  # brno and vienna: which cluster?
    code, text = run([*base, "--site", "brno", "--deployment", "glm-5-1", *common])
    assert code == 2 and "no replica of `glm-5-1` at site `brno`" in text
    assert not list(tmp_path.iterdir())
    brno_only = tmp_path.parent / "brno-only"  # a federation whose gateway runs in Brno only
    shutil.copytree(repo, brno_only)
    edit_yaml(brno_only / "fabric.yaml", lambda d: d["gateway"].update(sites={"brno": {}}))
    code, text = run([*base[:2], str(brno_only), *base[3:], "--site", "vienna", "--via", "gateway", *common])
    assert code == 2 and "runs no tenant gateway" in text
    assert not list(tmp_path.iterdir())
