"""`fabric canary` against the real vLLM (CPU, tiny model), and its prober in front of the real LiteLLM proxy.

Three engines serve qwen3-5 from the plan's own arguments: `same` (the plan's context, 1024), `long`
(2048: drift) and `changed` (another tiny model under the same checkpoint name: the model changed).
What we found: the tiny model's greedy answers are identical across --max-model-len (and across
--dtype bfloat16, tried by hand): a short answer does not depend on the context length. The canary
therefore also compares what each engine reports running with its plan, and names `long` by its
max_model_len; `changed` it names by its answers. A stand-in that answers /health and /metrics but
never a token fails by its deadline, and the gateway stops sending it requests.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.cli.main import main
from llm_fabric.engine.local.server import cpu_stand_in_args, cpu_stand_in_env, start_engine
from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.engine.process import LocalEngine, free_port
from llm_fabric.plan.document import load_plan
from tests.fixtures.engine import START_TIMEOUT
from tests.fixtures.gateway_site import edit_yaml
from tests.fixtures.processes import background, wait_for
from tests.fixtures.silent_engine import SilentEngine
from tests.live.plans import DEPLOYMENT, plan_of, planned_site, promtool_lint

pytestmark = [pytest.mark.engine, pytest.mark.slow]

CONTEXT = 1024
COUNT = ["--prompt", "count"]  # the prompt without a script or tool expectation (the tiny model writes bytes)


@dataclass
class Fleet:
    repo: Path
    plan: Path
    engines: dict[str, LocalEngine]
    silent: SilentEngine

    def url(self, name: str) -> str:
        return self.silent.url if name == "silent" else self.engines[name].base_url


@pytest.fixture(scope="module")
def fleet(engine_python_path: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("canary")
    repo = planned_site(root / "site", max_model_len=CONTEXT, replicas=2)
    # two qwen3-5 replicas need the B300 GPUs kimi-k2-6 holds in the example
    edit_yaml(repo / "deployments" / "kimi-k2-6.yaml", lambda d: d.update(replicas=0))
    subprocess.run(["git", "commit", "-qam", "canary test site"], cwd=repo, check=True, capture_output=True)
    plan = plan_of(repo, root / "plan.json")
    replica = load_plan(plan).replicas_of(DEPLOYMENT)[0]
    checkpoint = replica.engine_args[0]
    changed_model = build_tiny_model(root / "changed-model", seed=1)
    specs = {"same": (tiny_model, CONTEXT), "long": (tiny_model, 2 * CONTEXT), "changed": (changed_model, CONTEXT)}
    engines: dict[str, LocalEngine] = {}
    silent = SilentEngine()
    silent.start()
    try:
        for name, (model, context) in specs.items():
            run_dir = root / f"engine-{name}"
            (run_dir / checkpoint).parent.mkdir(parents=True)
            (run_dir / checkpoint).symlink_to(model)  # /v1/models' root is the plan's checkpoint, as on a cluster
            engines[name] = start_engine(
                checkpoint,
                run_dir,
                engine_args=cpu_stand_in_args(replica.engine_args, served_name=DEPLOYMENT, max_model_len=context),
                env=cpu_stand_in_env(replica.engine_env),
                python=engine_python_path,
            )
        for engine in engines.values():
            engine.wait_healthy(START_TIMEOUT)
        yield Fleet(repo, plan, engines, silent)
    finally:
        for engine in engines.values():
            engine.stop()
        silent.stop()


def canary(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], replicas: dict[int, str], *args: str, repo: Path | None = None
) -> tuple[int, str, str]:
    argv = ["canary", "-C", str(repo or fleet.repo), "--plan", str(fleet.plan)]
    for index, name in replicas.items():
        argv += ["--endpoint", f"{DEPLOYMENT}/{index}={fleet.url(name)}"]
    capsys.readouterr()
    code = main([*argv, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_two_runs_give_the_same_answers(fleet: Fleet, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    runs = []
    for _ in range(2):
        code, out, err = canary(fleet, capsys, {0: "same"}, *COUNT, "--json")
        assert code == 0, err
        runs.append(json.loads(out))
    answers = [[(a["prompt"], a["text"], a["completion_tokens"]) for a in r["replicas"][0]["answers"]] for r in runs]
    assert answers[0] == answers[1]
    assert answers[0][0][2] > 0 and answers[0][0][1]
    code, out, _ = canary(fleet, capsys, {0: "same"}, *COUNT, "--metrics", str(tmp_path / "canary.prom"))
    assert code == 0
    assert f"{DEPLOYMENT}/0 ({fleet.url('same')}): pass, 1 prompt(s), no reference or sibling to compare" in out
    text = (tmp_path / "canary.prom").read_text()
    assert (
        f'fabric_canary_replica_pass{{deployment="{DEPLOYMENT}",node="dgx-b300-01",replica="0",site="brno"}} 1.0'
        in text
    )
    assert promtool_lint(text) == ""


def test_the_cheap_signals_fail_what_the_stand_in_drops(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """Every prompt of the recipe: the CPU stand-in serves without the recipe's tool parser, as a
    misconfigured replica would, and the tiny model writes no letters where the capital's answer must."""
    code, out, err = canary(fleet, capsys, {0: "same"})
    assert code == 3
    assert f"{DEPLOYMENT}/0 ({fleet.url('same')}): FAIL" in out
    assert "  capital: answer in script none, not latin" in out
    assert '  tool: HTTP 400: "auto" tool choice requires --enable-auto-tool-choice' in out
    assert f"1 replica(s) fail the canary: {DEPLOYMENT}/0 (capital: answer in script none, not latin)" in err


def test_another_context_length_is_drift_and_a_disagreeing_replica(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert (
        main(
            [
                "check",
                "live",
                "-C",
                str(fleet.repo),
                "--plan",
                str(fleet.plan),
                "--endpoint",
                f"{DEPLOYMENT}/1={fleet.url('long')}",
            ]
        )
        == 3
    )
    out = capsys.readouterr().out
    assert f"  max_model_len: planned {CONTEXT}, engine reports {2 * CONTEXT}" in out

    code, out, err = canary(fleet, capsys, {0: "same", 1: "long"}, *COUNT, "--json")
    assert code == 3
    verdicts = {r["replica"]: r for r in json.loads(out)["replicas"]}
    assert verdicts[f"{DEPLOYMENT}/0"]["state"] == "pass"
    long = verdicts[f"{DEPLOYMENT}/1"]
    assert long["state"] == "fail"
    assert long["failures"] == [f"configuration: max_model_len planned {CONTEXT}, engine reports {2 * CONTEXT}"]
    assert long["siblings_agree"] is True  # the finding: the context length changes no greedy answer here
    assert f"1 replica(s) fail the canary: {DEPLOYMENT}/1 (configuration: max_model_len" in err


def test_a_changed_model_disagrees_and_with_a_recorded_reference_only_it_fails(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without a reference two disagreeing replicas both fail: nothing says which one is right
    code, out, _ = canary(fleet, capsys, {0: "same", 1: "changed"}, *COUNT)
    assert code == 3
    assert f"differs from sibling(s) {DEPLOYMENT}/1" in out
    assert f"differs from sibling(s) {DEPLOYMENT}/0" in out

    repo = tmp_path / "site"
    shutil.copytree(fleet.repo, repo, symlinks=True)
    monkeypatch.chdir(tmp_path)  # -C relative to the current folder, as an operator types it
    args = [*COUNT, "--record", "--branch", "canary/qwen3-5"]
    code, _, err = canary(fleet, capsys, {0: "same"}, *args, repo=Path("site"))
    assert code == 0, err
    assert f"recorded canary/{DEPLOYMENT}.yaml on branch canary/qwen3-5" in err
    assert not (repo / "canary").exists()  # the checkout is untouched: the change waits on its branch
    subprocess.run(["git", "merge", "-q", "--ff-only", "canary/qwen3-5"], cwd=repo, check=True, capture_output=True)
    recorded = yaml.safe_load((repo / "canary" / f"{DEPLOYMENT}.yaml").read_text())
    assert recorded["recorded_from"] == f"{DEPLOYMENT}/0"
    assert recorded["fingerprint"] == load_plan(fleet.plan).replicas_of(DEPLOYMENT)[0].config_fingerprint.sha256  # type: ignore[union-attr]

    metrics = tmp_path / "canary.prom"
    code, out, err = canary(fleet, capsys, {0: "same", 1: "changed"}, *COUNT, "--metrics", str(metrics), repo=repo)
    assert code == 3
    assert f"{DEPLOYMENT}/0 ({fleet.url('same')}): pass, 1 prompt(s), agrees with the reference" in out
    assert f"{DEPLOYMENT}/1 ({fleet.url('changed')}): FAIL" in out
    assert f"(recorded from {DEPLOYMENT}/0)" in out
    assert f"1 replica(s) fail the canary: {DEPLOYMENT}/1 (count: answer " in err
    text = metrics.read_text()
    labels = f'deployment="{DEPLOYMENT}",node="dgx-b300-01",replica="%d",site="brno"'
    assert f"fabric_canary_reference_agreement{{{labels % 0}}} 1.0" in text
    assert f"fabric_canary_reference_agreement{{{labels % 1}}} 0.0" in text
    assert f"fabric_canary_sibling_agreement{{{labels % 1}}} 0.0" in text

    # the changed engine alone: it disagrees with the reference, and the second record changes nothing
    code, out, _ = canary(fleet, capsys, {1: "changed"}, *COUNT, repo=repo)
    assert code == 3 and "differs from the reference" in out
    code, _, err = canary(fleet, capsys, {0: "same"}, *COUNT, "--record", repo=repo)
    assert code == 0 and f"reference of {DEPLOYMENT} unchanged: nothing to commit" in err
    code, out, _ = canary(fleet, capsys, {0: "same"}, *COUNT, repo=repo)
    assert code == 0 and "agrees with the reference" in out


def test_a_stand_in_that_never_sends_a_token_fails_by_its_deadline(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code, out, err = canary(fleet, capsys, {0: "same", 1: "silent"}, *COUNT, "--timeout", "3")
    assert code == 3
    assert time.monotonic() - started < 30
    assert f"{DEPLOYMENT}/1 ({fleet.silent.url}): FAIL" in out
    assert "  count: no answer: timed out" in out
    assert f"1 replica(s) fail the canary: {DEPLOYMENT}/1 (count: no answer: timed out)" in err


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _wait(what: str, check: Any, log: Path, timeout: float = 120) -> Any:
    return wait_for(what, check, [log], timeout, every=0.5)


def test_the_gateway_stops_sending_requests_to_a_replica_the_prober_takes_out(fleet: Fleet, tmp_path: Path) -> None:
    from tests.gateway.conftest import require_gateway

    require_gateway()
    fabric = str(Path(sys.executable).parent / "fabric")
    prober_port = free_port()
    prober = f"http://127.0.0.1:{prober_port}"
    prober_argv = [
        fabric, "canary", "-C", str(fleet.repo), "--plan", str(fleet.plan), *COUNT, "--timeout", "3",
        "--endpoint", f"{DEPLOYMENT}/0={fleet.url('same')}", "--endpoint", f"{DEPLOYMENT}/1={fleet.silent.url}",
        "--serve", f"127.0.0.1:{prober_port}", "--every", "2",
    ]  # fmt: skip
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["tenants", "key", "issue", "-C", str(fleet.repo), "muni-researchers", "--json"]) == 0
    key = json.loads(buffer.getvalue())["key"]
    with background(prober_argv, tmp_path / "prober.log"):
        verdict = _wait(
            "the prober never failed the stand-in",
            lambda: (v := _get(f"{prober}/replicas/{DEPLOYMENT}/1"))["state"] == "fail" and v,
            tmp_path / "prober.log",
        )
        assert verdict["failures"] == ["count: no answer: timed out"]
        assert _get(f"{prober}/replicas/{DEPLOYMENT}/0")["state"] == "pass"
        assert _get(f"{prober}/replicas/nope/0")["state"] == "unknown"
        rotation = {r["replica"]: r for r in _get(f"{prober}/rotation")["replicas"]}
        assert rotation[f"{DEPLOYMENT}/1"]["in_rotation"] is False
        assert rotation[f"{DEPLOYMENT}/1"]["reasons"] == ["canary: count: no answer: timed out"]
        assert rotation[f"{DEPLOYMENT}/0"]["in_rotation"] is True
        with urllib.request.urlopen(f"{prober}/metrics", timeout=5) as response:
            metrics = response.read().decode()
        assert (
            f'fabric_canary_in_rotation{{deployment="{DEPLOYMENT}",node="dgx-b300-01",replica="1",site="brno"}} 0.0'
            in metrics
        )

        gateway_port = free_port()
        gateway_argv = [
            fabric, "gateway", "run", "-C", str(fleet.repo), "--site", "brno", "--plan", str(fleet.plan),
            "--port", str(gateway_port),
            "--records", str(tmp_path / "records"), "--run-dir", str(tmp_path / "gateway"),
            "--replica", f"{DEPLOYMENT}/0={fleet.url('same')}/v1", "--replica", f"{DEPLOYMENT}/1={fleet.silent.url}/v1",
        ]  # fmt: skip
        gateway = f"http://127.0.0.1:{gateway_port}"
        log = tmp_path / "gateway.log"
        with background(gateway_argv, log, {"FABRIC_CANARY_URL": prober}):
            config = yaml.safe_load(
                (
                    _wait("no gateway config", lambda: (tmp_path / "gateway" / "litellm-config.yaml").is_file(), log)
                    and (tmp_path / "gateway" / "litellm-config.yaml")
                ).read_text()
            )
            entries = [
                e["model_info"].get("fabric_replica")
                for e in config["model_list"]
                if e["model_name"] == f"{DEPLOYMENT}@public"
            ]
            assert entries == [f"{DEPLOYMENT}/0", f"{DEPLOYMENT}/1"]
            _wait(
                "the gateway did not start",
                lambda: urllib.request.urlopen(gateway + "/health/liveliness", timeout=2).status == 200,
                log,
            )
            for n in range(8):
                body = {
                    "model": f"{DEPLOYMENT}@public",
                    "messages": [{"role": "user", "content": f"through the gateway {n}"}],
                    "max_tokens": 4,
                }
                request = urllib.request.Request(
                    gateway + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                    headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
                )  # fmt: skip
                with urllib.request.urlopen(request, timeout=20) as response:
                    assert response.status == 200
        assert [p for p in fleet.silent.prompts() if p.startswith("through the gateway")] == []
