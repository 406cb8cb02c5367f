"""`fabric weights stage` against a Hugging Face mirror on 127.0.0.1 (tests/fixtures/hf_mirror.py): the real
huggingface_hub downloads the tiny model into the cache, the lock pins it, and staging the same lock again
downloads nothing; the pod's check and `plan --base` then read what stage wrote."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.local.tiny_model import build_tiny_model
from llm_fabric.site.gitrepo import commit_paths
from llm_fabric.site.loader import load_site
from tests.fixtures.hf_cache import hub_snapshot
from tests.fixtures.hf_mirror import Mirror, commit_of, hf_mirror
from tests.weights.pods import render_vienna, run_pod_check

CHECKPOINT = "openai/gpt-oss-120b"  # what vienna's only deployment (gpt-oss-120b, mxfp4) loads


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mirror]:
    with hf_mirror({CHECKPOINT: build_tiny_model(tmp_path / "tiny")}) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield served


def _stage(site: Path, plan: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["weights", "stage", "-C", str(site), "--plan", str(plan), "--cache", str(cache), "--site", "vienna"])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_stage_twice_downloads_once(
    site_repo: Path, tmp_path: Path, mirror: Mirror, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, cache = tmp_path / "plan.json", tmp_path / "models"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan)]) == 0
    commit = commit_of(CHECKPOINT)

    rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 0, out
    assert f"downloaded {CHECKPOINT}@{commit[:12]}" in out and f"pinned    {CHECKPOINT}@{commit[:12]}: 6 files" in out
    assert sorted(mirror.downloads) == sorted(f"{CHECKPOINT}/{p}" for p in mirror.repos[CHECKPOINT])
    assert set(mirror.downloads.values()) == {1}
    lock = (site_repo / "weights.lock").read_text()
    locked = load_site(site_repo).weights_lock.checkpoints[CHECKPOINT]
    assert locked.revision == commit
    assert {f.path: f.sha256 for f in locked.files} == {p: f.sha256 for p, f in mirror.repos[CHECKPOINT].items()}
    # what the engine opens offline (HF_HOME=CACHE/hf, no --revision) is the pinned snapshot
    assert hub_snapshot(cache / "hf", CHECKPOINT).name == commit
    capsys.readouterr()
    assert main(["weights", "verify", "-C", str(site_repo), "--cache", str(cache)]) == 0  # the pod's check
    assert f"ok {CHECKPOINT}@{commit[:12]}: 6 files" in capsys.readouterr().out

    requests = len(mirror.requests)
    rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 0, out
    assert f"reused     {CHECKPOINT}@{commit[:12]}" in out and "weights.lock: unchanged" in out
    assert len(mirror.requests) == requests  # not even asked: the files match the lock
    assert set(mirror.downloads.values()) == {1}
    assert (site_repo / "weights.lock").read_text() == lock

    # a file lost from the cache: only it is fetched again, from the pinned commit
    lost = hub_snapshot(cache / "hf", CHECKPOINT) / "tokenizer.json"
    lost.resolve().unlink()
    lost.unlink()
    rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 0, out
    assert f"downloaded {CHECKPOINT}@{commit[:12]}" in out and "weights.lock: unchanged" in out
    assert mirror.downloads[f"{CHECKPOINT}/tokenizer.json"] == 2
    assert sum(mirror.downloads.values()) == len(mirror.repos[CHECKPOINT]) + 1
    assert (site_repo / "weights.lock").read_text() == lock

    assert commit_paths(site_repo, [site_repo / "weights.lock"], "stage gpt-oss-120b") is not None
    capsys.readouterr()
    assert main(["plan", "-C", str(site_repo), "--base", "HEAD~1"]) == 3  # the restarts it causes: docs/weights.md
    review = capsys.readouterr().out
    assert "weights.lock pins other bytes" in review
    assert "Changes against HEAD~1: weights.lock" in review and f"- -> {commit[:12]}" in review


def test_checkpoint_not_on_the_mirror_and_unreachable_mirror(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, cache = tmp_path / "plan.json", tmp_path / "models"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan)]) == 0
    with hf_mirror({"someone/else": build_tiny_model(tmp_path / "tiny")}) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 2, out
    assert f"checkpoint `{CHECKPOINT}` is not on the mirror" in out and f"HF_ENDPOINT={served.url}" in out
    assert "Traceback" not in out and not (site_repo / "weights.lock").exists()

    monkeypatch.setenv("HF_ENDPOINT", served.url)  # the server is gone: nothing listens there now
    rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 2, out
    assert f"cannot download `{CHECKPOINT}`" in out and "set HF_ENDPOINT to the site's mirror" in out


def test_a_file_corrupted_after_staging_is_refused_by_the_pod(
    site_repo: Path, tmp_path: Path, mirror: Mirror, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, cache = tmp_path / "plan.json", tmp_path / "models"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan)]) == 0
    assert _stage(site_repo, plan, cache, capsys)[0] == 0
    rendered = render_vienna(site_repo, plan, tmp_path / "out")
    assert run_pod_check(rendered, tmp_path, cache).returncode == 0
    blob = (hub_snapshot(cache / "hf", CHECKPOINT) / "model.safetensors").resolve()
    data = bytearray(blob.read_bytes())
    data[100] ^= 0x01
    blob.write_bytes(bytes(data))
    done = run_pod_check(rendered, tmp_path, cache)
    assert done.returncode == 1
    assert f"{CHECKPOINT}: model.safetensors has sha256 " in done.stdout and "re-stage it" in done.stdout

    # staging again does not paper over it: the lock stays, the damaged snapshot is named
    lock = (site_repo / "weights.lock").read_text()
    rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 2 and "model.safetensors differs from the lock" in out and "delete the snapshot" in out
    assert (site_repo / "weights.lock").read_text() == lock


def _git(site: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=site, capture_output=True, text=True, check=True)
    return done.stdout


def _edit_lock(site: Path, old: str, new: str) -> None:
    lock = site / "weights.lock"
    text = lock.read_text()
    assert old in text
    lock.write_text(text.replace(old, new, 1))
    _git(site, "commit", "-qam", "hand-edited weights.lock")


def test_a_hand_edited_sha256_is_refused_by_validate_and_plan_against_the_base(
    site_repo: Path, tmp_path: Path, mirror: Mirror, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 F2: the lock is trusted only as a reviewed change: stage, commit, then a branch that keeps the
    revision but changes a hash passes neither `validate --base` nor `plan --base` (exit 3)."""
    plan, cache = tmp_path / "plan.json", tmp_path / "models"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan)]) == 0
    rc, out = _stage(site_repo, plan, cache, capsys)
    assert rc == 0, out
    commit = commit_of(CHECKPOINT)
    assert commit_paths(site_repo, [site_repo / "weights.lock"], "stage gpt-oss-120b") is not None
    base = _git(site_repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    _git(site_repo, "checkout", "-qb", "edited")

    real = mirror.repos[CHECKPOINT]["model.safetensors"].sha256
    _edit_lock(site_repo, real, real[:-1] + ("1" if real[-1] == "0" else "0"))  # one hex digit
    for command in (["validate", "-C", str(site_repo), "--base", base], ["plan", "-C", str(site_repo), "--base", base]):
        capsys.readouterr()
        rc = main(command)
        out = "".join(capsys.readouterr())
        assert rc == 3, out
        assert f"weights.lock: {CHECKPOINT}@{commit}: the same revision pins other files or hashes" in out, out
        assert "(model.safetensors)" in out and "a commit's files never change" in out
    # the edit would only have shown up at the pods' next restart: the cache holds the real bytes
    capsys.readouterr()
    assert main(["weights", "verify", "-C", str(site_repo), "--cache", str(cache)]) == 2
    assert "model.safetensors has sha256 " in "".join(capsys.readouterr())


def test_a_revision_not_staged_from_main_needs_an_accepted_reason(
    site_repo: Path, tmp_path: Path, mirror: Mirror, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 F2: a revision is any commit of the Hub repo (a pull request's too): one whose entry does not
    say `ref: main` is refused by the review until the entry says why it is accepted (`accept_ref`)."""
    plan, cache = tmp_path / "plan.json", tmp_path / "models"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan)]) == 0
    assert _stage(site_repo, plan, cache, capsys)[0] == 0
    commit = commit_of(CHECKPOINT)
    base = _git(site_repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    _git(site_repo, "checkout", "-qb", "pr-revision")
    # as a hand-written entry (or one staged from refs/pr/1) reads: another ref than main
    lock = site_repo / "weights.lock"
    assert f"revision: {commit}\n    ref: main\n" in lock.read_text()  # where stage resolved it
    lock.write_text(lock.read_text().replace("ref: main", "ref: refs/pr/1"))
    commit_paths(site_repo, [lock], "pin a pull request's commit")
    capsys.readouterr()
    assert main(["validate", "-C", str(site_repo), "--base", base]) == 3
    out = "".join(capsys.readouterr())
    assert f"weights.lock: {CHECKPOINT}@{commit}: the revision was not staged from `main` (ref `refs/pr/1`)" in out
    assert "accept_ref: REASON" in out
    capsys.readouterr()
    assert main(["plan", "-C", str(site_repo), "--base", base]) == 3
    assert "the revision was not staged from `main` (ref `refs/pr/1`)" in "".join(capsys.readouterr())

    lock.write_text(lock.read_text().replace("ref: refs/pr/1", "ref: refs/pr/1\n    accept_ref: the fix we need"))
    commit_paths(site_repo, [lock], "accept it")
    capsys.readouterr()
    assert main(["validate", "-C", str(site_repo), "--base", base]) == 0, "".join(capsys.readouterr())
