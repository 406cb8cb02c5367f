"""`fabric check live` on the SGLang path: the stand-in answers `/get_server_info` with the arguments it was
started with, the plan's own `sglang.launch_server` arguments (SGLang's field names)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.sglang.command import SGLANG_VERSION
from llm_fabric.plan.document import load_plan
from tests.fixtures.sglang_standin import SglangStandin, options_from_args
from tests.live.plans import DEPLOYMENT, drift_sample, plan_of, planned_site, promtool_lint


@pytest.fixture(scope="module")
def sglang_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("check-live-sglang")
    repo = planned_site(root / "site", engine="sglang", max_model_len=32768)
    return repo, plan_of(repo, root / "plan.json")


def _standin(args: list[str]) -> SglangStandin:
    options, _ = options_from_args(args, lenient=True)  # the plan's port is the pod's: the stand-in takes a free one
    return SglangStandin(options).start()


@pytest.fixture
def standins(sglang_plan: tuple[Path, Path]) -> Iterator[dict[str, SglangStandin]]:
    _, plan_file = sglang_plan
    replica = load_plan(plan_file).replicas_of(DEPLOYMENT)[0]
    assert replica.engine == "sglang"
    args = list(replica.engine_args)
    drifted = list(args)
    drifted[drifted.index("--context-length") + 1] = "16384"
    started = {"planned": _standin(args), "drifted": _standin(drifted)}
    try:
        yield started
    finally:
        for standin in started.values():
            standin.stop()


def test_the_stand_in_stands_in_for_the_pinned_sglang() -> None:
    options, _ = options_from_args(["--served-model-name", "m"])
    assert options.server_info()["version"] == SGLANG_VERSION


def test_an_sglang_replica_as_planned_and_one_with_another_context_length(
    sglang_plan: tuple[Path, Path],
    standins: dict[str, SglangStandin],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo, plan_file = sglang_plan
    check = ["check", "live", "-C", str(repo), "--plan", str(plan_file)]
    planned = f"{DEPLOYMENT}/0={standins['planned'].base_url}"
    assert main([*check, "--endpoint", planned]) == 0
    out = capsys.readouterr().out
    assert (
        f"{DEPLOYMENT}/0 (sglang, {standins['planned'].base_url}): as planned (reachable, chat_template, checkpoint, "
        in out
    )
    assert (
        "engine_version, kv_cache_dtype, max_model_len, quantization, reasoning_parser, served_model_name, "
        "tool_call_parser)" in out
    )

    metrics = tmp_path / "drift.prom"
    drifted = f"{DEPLOYMENT}/0={standins['drifted'].base_url}"
    assert main([*check, "--endpoint", drifted, "--metrics", str(metrics)]) == 3
    captured = capsys.readouterr()
    assert f"{DEPLOYMENT}/0 (sglang, {standins['drifted'].base_url}): 1 difference(s) from the plan" in captured.out
    assert "  max_model_len: planned 32768, engine reports 16384" in captured.out
    assert f"1 replica(s) do not run what the plan says: {DEPLOYMENT}/0" in captured.err
    text = metrics.read_text()
    assert drift_sample("max_model_len", 1) in text
    assert drift_sample("kv_cache_dtype", 0) in text
    assert promtool_lint(text) == ""

    assert main([*check, "--endpoint", drifted, "--json"]) == 3
    found = json.loads(capsys.readouterr().out)
    assert found["drift"] is True
    assert found["replicas"][0]["drifts"] == [{"field": "max_model_len", "planned": 32768, "reported": 16384}]


def test_an_endpoint_that_is_no_replica_of_the_plan_is_a_usage_error(
    sglang_plan: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, plan_file = sglang_plan
    code = main(
        ["check", "live", "-C", str(repo), "--plan", str(plan_file), "--endpoint", "qwen3-5/7=http://127.0.0.1:1"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--endpoint `qwen3-5/7` is not a replica of the plan" in err
    assert "qwen3-5/0" in err
    assert main(["check", "live", "-C", str(repo), "--plan", str(plan_file)]) == 2
    assert "no engine to ask: pass --endpoint DEPLOYMENT/INDEX=URL" in capsys.readouterr().err


def test_the_canary_on_the_sglang_path_passes_the_planned_replica_and_fails_the_drifted_one(
    sglang_plan: tuple[Path, Path],
    standins: dict[str, SglangStandin],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same canary as for vLLM: its prompts through SGLang's OpenAI API, the configuration from
    `/get_server_info` (the stand-in answers tokens of its own, so only the count prompt is asked)."""
    repo, plan_file = sglang_plan
    canary = ["canary", "-C", str(repo), "--plan", str(plan_file), "--prompt", "count", "--json"]
    capsys.readouterr()
    assert main([*canary, "--endpoint", f"{DEPLOYMENT}/0={standins['planned'].base_url}"]) == 0
    planned = json.loads(capsys.readouterr().out)["replicas"][0]
    assert planned["state"] == "pass"
    assert [(a["prompt"], a["completion_tokens"]) for a in planned["answers"]] == [("count", 32)]

    assert main([*canary, "--endpoint", f"{DEPLOYMENT}/0={standins['drifted'].base_url}"]) == 3
    captured = capsys.readouterr()
    drifted = json.loads(captured.out)["replicas"][0]
    assert drifted["state"] == "fail"
    assert drifted["failures"] == ["configuration: max_model_len planned 32768, engine reports 16384"]
    assert f"1 replica(s) fail the canary: {DEPLOYMENT}/0 (configuration: max_model_len" in captured.err
