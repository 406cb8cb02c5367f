"""`fabric check live` against the real vLLM (CPU, tiny model): one engine started from the plan's own
`vllm serve` arguments, asked by two plans; the one that planned its context length agrees, the other
names `max_model_len`.

The engine loads the tiny model under the plan's checkpoint name (a folder of that name in its working
directory), so `/v1/models`' `root` is the checkpoint the plan says, as on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.local.server import cpu_stand_in_args, cpu_stand_in_env, start_engine
from llm_fabric.engine.process import LocalEngine
from llm_fabric.plan.document import load_plan
from tests.fixtures.engine import START_TIMEOUT
from tests.live.plans import DEPLOYMENT, drift_sample, plan_of, planned_site, promtool_lint

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ENGINE_CONTEXT = 1024  # the stand-in engine's context (cpu_stand_in_args' default)


@dataclass
class Live:
    repo: Path
    matching: Path  # planned max_model_len 1024, the engine's
    other: Path  # planned 2048
    engine: LocalEngine


@pytest.fixture(scope="module")
def live(engine_python_path: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("check-live")
    repo = planned_site(root / "site", max_model_len=ENGINE_CONTEXT)
    matching = plan_of(repo, root / "plan.json")
    other_repo = planned_site(root / "other-site", max_model_len=2 * ENGINE_CONTEXT)
    other = plan_of(other_repo, root / "other.json")

    replica = load_plan(matching).replicas_of(DEPLOYMENT)[0]
    checkpoint = replica.engine_args[0]
    run_dir = root / "engine-run"
    (run_dir / checkpoint).parent.mkdir(parents=True)
    (run_dir / checkpoint).symlink_to(tiny_model)
    engine = start_engine(
        checkpoint,
        run_dir,
        engine_args=cpu_stand_in_args(replica.engine_args, served_name=DEPLOYMENT, max_model_len=ENGINE_CONTEXT),
        env=cpu_stand_in_env(replica.engine_env),
        python=engine_python_path,
    )
    try:
        engine.wait_healthy(START_TIMEOUT)
        yield Live(repo, matching, other, engine)
    finally:
        engine.stop()


def test_a_matching_plan_reports_no_drift(live: Live, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metrics = tmp_path / "drift.prom"
    endpoint = f"{DEPLOYMENT}/0={live.engine.base_url}/v1"
    code = main(
        [
            "check",
            "live",
            "-C",
            str(live.repo),
            "--plan",
            str(live.matching),
            "--endpoint",
            endpoint,
            "--metrics",
            str(metrics),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        f"{DEPLOYMENT}/0 (vllm, {live.engine.base_url}): as planned "
        "(reachable, checkpoint, engine_version, kv_cache_dtype, max_model_len, served_model_name)"
    ) in out
    assert "not asked (no --endpoint): deepseek-v3-2/0," in out
    text = metrics.read_text()
    for field in ("checkpoint", "kv_cache_dtype", "max_model_len", "served_model_name", "reachable"):
        assert drift_sample(field, 0) in text
    assert promtool_lint(text) == ""


def test_a_plan_with_another_context_length_names_max_model_len(
    live: Live, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = tmp_path / "drift.prom"
    endpoint = f"{DEPLOYMENT}/0={live.engine.base_url}"
    args = [
        "check",
        "live",
        "-C",
        str(live.repo),
        "--plan",
        str(live.other),
        "--endpoint",
        endpoint,
        "--metrics",
        str(metrics),
    ]
    assert main(args) == 3
    captured = capsys.readouterr()
    assert f"{DEPLOYMENT}/0 (vllm, {live.engine.base_url}): 1 difference(s) from the plan" in captured.out
    assert f"  max_model_len: planned {2 * ENGINE_CONTEXT}, engine reports {ENGINE_CONTEXT}" in captured.out
    assert f"1 replica(s) do not run what the plan says: {DEPLOYMENT}/0" in captured.err
    text = metrics.read_text()
    assert drift_sample("max_model_len", 1) in text
    assert drift_sample("checkpoint", 0) in text
