"""kill -9 of each writing command at random moments, then the checks a user would rely on (issue 20).

After a kill: `init` left no folder or a complete committed one; `nodes retire`, `enroll` and `keys add`
re-run to completion with everything committed; `nodes remediate` left the checkout as it was and its
review branch absent or complete; `render` and `report` re-run to outputs that verify,
with no temporary file left. FABRIC_KILL_TRIALS (default 2) trials per command; each waits a random
fraction of the uninterrupted run's duration (seeded), so the kills land all over the command.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.documents import load_model
from llm_fabric.enrollment.facts import save_bundle
from llm_fabric.ledger.store.period import Month
from llm_fabric.site.gitrepo import git
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import default_private_key_path
from tests.fixtures.factsbundle import make_bundle
from tests.fixtures.ledger_synthetic import generate_records

FABRIC = str(Path(sys.executable).parent / "fabric")
TRIALS = int(os.environ.get("FABRIC_KILL_TRIALS", "2"))
RNG = random.Random(int(os.environ.get("FABRIC_KILL_SEED", "20")))


def _fabric(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FABRIC, *args], capture_output=True, text=True, timeout=300, check=False)


def _timed(*args: str) -> float:
    started = time.monotonic()
    proc = _fabric(*args)
    assert proc.returncode == 0, proc.stderr
    return time.monotonic() - started


KILLS: Counter[str] = Counter()  # command -> "killed" / "finished first": printed at the end (pytest -s)


def _killed(args: list[str], within: float) -> int | None:
    """Start `fabric ARGS`, SIGKILL it after a random part of `within` seconds; its exit code if it finished first."""
    proc = subprocess.Popen([FABRIC, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(RNG.uniform(0.0, within))
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    KILLS[
        f"{args[0]} {args[1] if args[0] in ('nodes', 'keys') else ''}".strip() + (": killed" if killed else ": done")
    ] += 1
    return None if killed else proc.returncode


@pytest.fixture(scope="module", autouse=True)
def _kill_summary() -> Iterator[None]:
    yield
    print("\nkill trials:", dict(sorted(KILLS.items())))


def _clean(repo: Path) -> bool:
    return git(repo, "status", "--porcelain").strip() == ""


def _temp_files(folder: Path) -> list[Path]:
    # the names write_atomic's temporary files have (spelt out: this file also runs against older code)
    return [p for p in folder.rglob(".*.tmp") if re.match(r"^\..+\.[a-z0-9_]{8}\.tmp$", p.name)]


def test_killed_init_leaves_nothing_or_a_committed_repo(tmp_path: Path) -> None:
    within = _timed("init", str(tmp_path / "probe"), "--example", "cerit-sc")
    for trial in range(TRIALS):
        target = tmp_path / f"site{trial}"
        _killed(["init", str(target), "--example", "cerit-sc"], within)
        if target.exists():
            assert (target / ".git").is_dir() and _clean(target)
            assert git(target, "log", "--format=%s").strip() == "fabric init --example cerit-sc"
        else:
            proc = _fabric("init", str(target), "--example", "cerit-sc")
            assert proc.returncode == 0, proc.stderr
        assert not any(p.name.endswith(".init-tmp") for p in tmp_path.iterdir())  # the re-run or rename removed it


def test_killed_retire_is_completed_by_the_rerun(make_site_repo) -> None:  # type: ignore[no-untyped-def]
    within = _timed("nodes", "retire", "dgx-b200-01", "-C", str(make_site_repo(name="probe")), "--no-drain")
    for trial in range(TRIALS):
        site = make_site_repo(name=f"site{trial}")
        _killed(["nodes", "retire", "dgx-b200-01", "-C", str(site), "--no-drain"], within)
        proc = _fabric("nodes", "retire", "dgx-b200-01", "-C", str(site), "--no-drain")
        assert proc.returncode == 0, proc.stderr
        assert _clean(site) and git(site, "log", "-1", "--format=%s").strip() == "retire dgx-b200-01"
        assert load_model(site / "nodes" / "dgx-b200-01.yaml", NodeManifest).status == "retired"
        assert (site / "retired" / "dgx-b200-01.yaml").is_file()
        assert _fabric("nodes", "verify", "-C", str(site)).returncode == 0


def test_killed_remediate_leaves_the_checkout_and_no_half_branch(make_site_repo) -> None:  # type: ignore[no-untyped-def]
    def args(site: Path) -> list[str]:  # remediate signs only with the key it is given (--key)
        key = site.parent / f"{site.name}.enrollment.key"
        return ["nodes", "remediate", "--node", "hgx-h100-tuwien", "--xid", "79", "-C", str(site), "--key", str(key)]

    within = _timed(*args(make_site_repo(name="probe")))
    for trial in range(TRIALS):
        site = make_site_repo(name=f"site{trial}")
        head = git(site, "rev-parse", "HEAD")
        _killed(args(site), within)
        assert _clean(site) and git(site, "rev-parse", "HEAD") == head  # the checkout is never written to
        branch = git(site, "branch", "--list", "remediate/*").strip()
        if branch:  # a branch exists only as update-ref made it: one signed cordon commit
            assert git(site, "log", "--format=%s", "main..remediate/hgx-h100-tuwien-xid79").strip() == (
                "cordon hgx-h100-tuwien: node-fatal Xid 79 (GPU has fallen off the bus)"
            )
        proc = _fabric(*args(site))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert ("nothing changed" in proc.stdout) == bool(branch), proc.stdout
        assert git(site, "rev-list", "--count", "main..remediate/hgx-h100-tuwien-xid79").strip() == "1"
        assert _clean(site) and git(site, "rev-parse", "HEAD") == head


def test_killed_enroll_and_keys_add_are_completed_by_the_rerun(make_site_repo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # how long each command takes, on a repo of its own: the kills fall within that time, so most land
    probe, site_repo = make_site_repo(name="probe"), make_site_repo(name="site")
    save_bundle(make_bundle("h100x8", uuid_salt="probe"), tmp_path / "probe.facts.json")
    probe_pub = tmp_path / "probe.pub"
    probe_pub.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    within = {
        "enroll": _timed("enroll", "h", "--facts", str(tmp_path / "probe.facts.json"), "-C", str(probe),
                         "--owner", "cerit-sc", "--site", "brno", "--name", "probe-box"),
        "keys add": _timed("keys", "add", str(probe_pub), "-C", str(probe), "--key",
                           str(default_private_key_path(probe)), "--name", "probe-key"),
    }  # fmt: skip
    private = str(default_private_key_path(site_repo))
    base = git(site_repo, "rev-parse", "HEAD").strip()
    landed = Counter[str]()
    for trial in range(TRIALS):
        bundle = tmp_path / f"b{trial}.facts.json"
        save_bundle(make_bundle("h100x8", uuid_salt=f"kill{trial}"), bundle)
        args = ["enroll", "h", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
        landed["enroll"] += _killed([*args, "--name", f"box-{trial}"], within["enroll"]) is None
        proc = _fabric(*args, "--name", f"box-{trial}")
        assert proc.returncode == 0, proc.stderr
        assert _clean(site_repo)
        # a new key each trial: adding the same key twice would be a no-op replace that proves nothing
        pem = (
            Ed25519PrivateKey.generate()
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        (tmp_path / f"k{trial}.pub").write_bytes(pem)
        add = ["keys", "add", str(tmp_path / f"k{trial}.pub"), "-C", str(site_repo), "--key", private]
        landed["keys add"] += _killed([*add, "--name", f"rotated-{trial}"], within["keys add"]) is None
        proc = _fabric(*add, "--name", f"rotated-{trial}")
        # a kill after the commit leaves the key added: the re-run says so; otherwise it adds it
        assert proc.returncode == 0 or "exists" in proc.stderr, proc.stderr
        assert _clean(site_repo), git(site_repo, "status", "--porcelain")
        assert (site_repo / "keys" / f"rotated-{trial}.pub").read_bytes() == pem
    # every enrolled node and endorsed key is there, judged against the repo before the trials
    proc = _fabric("validate", "-C", str(site_repo), "--base", base)
    assert proc.returncode == 0 and "valid:" in proc.stdout, proc.stdout + proc.stderr
    for trial in range(TRIALS):
        assert f"rotated-{trial}.pub" in proc.stdout, proc.stdout
    # the trials tested something only if some kill landed before the command finished
    if os.environ.get("FABRIC_KILL_TRIALS_MUST_LAND", "1") == "1":
        assert sum(landed.values()) > 0, f"no kill landed in {TRIALS} trials: every command finished first"


def test_killed_render_and_report_rerun_to_outputs_that_verify(site_repo: Path, tmp_path: Path) -> None:
    records = tmp_path / "october.jsonl"
    generate_records(records, Month.parse("2026-10"), 2_000, {"qwen3-5": (1100, 33958)}, ["muni-researchers"])
    report = ["report", "-C", str(site_repo), "--month", "2026-10", "--requests", str(records)]
    render_for = _timed("render", "--site", "brno", "-C", str(site_repo), "--out", str(tmp_path / "fresh"))
    report_for = _timed(*report, "--out", str(tmp_path / "fresh-report"))
    for trial in range(TRIALS):
        out = tmp_path / f"deploy{trial}"
        _killed(["render", "--site", "brno", "-C", str(site_repo), "--out", str(out)], render_for)
        assert _fabric("render", "--site", "brno", "-C", str(site_repo), "--out", str(out)).returncode == 0
        assert _temp_files(out) == []
        fresh = {p.relative_to(tmp_path / "fresh"): p.read_bytes() for p in (tmp_path / "fresh").rglob("*.yaml")}
        assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*.yaml")} == fresh

        folder = tmp_path / f"report{trial}"
        _killed([*report, "--out", str(folder)], report_for)
        proc = _fabric(*report, "--out", str(folder))
        assert proc.returncode == 0, proc.stderr
        assert _temp_files(folder) == []
        assert _fabric("report", "verify", str(folder)).returncode == 0


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FABRIC_ENROLLMENT_KEY", raising=False)


def test_keys_add_completes_a_key_a_kill_left_staged(make_site_repo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the state a kill between `git add` and `git commit` leaves: the key and its endorsement staged, no commit.
    # The index is not HEAD: the re-run must finish the commit, not refuse the key as one that "exists".
    site_repo = make_site_repo(name="site")
    private = str(default_private_key_path(site_repo))
    pub = tmp_path / "staged.pub"
    pub.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    add = ["keys", "add", str(pub), "-C", str(site_repo), "--key", private, "--name", "staged"]
    first = _fabric(*add)
    assert first.returncode == 0, first.stderr
    parent = git(site_repo, "rev-parse", "HEAD~1").strip()
    git(site_repo, "reset", "-q", "--soft", "HEAD~1")  # the commit undone, its files still staged
    assert "A  keys/staged.pub" in git(site_repo, "status", "--porcelain")
    rerun = _fabric(*add)
    assert rerun.returncode == 0, rerun.stderr
    assert "endorsed by" in rerun.stdout
    assert _clean(site_repo), git(site_repo, "status", "--porcelain")
    assert git(site_repo, "rev-parse", "HEAD~1").strip() == parent  # one commit on top: the key's
    assert "keys/staged.pub" in git(site_repo, "show", "--name-only", "--format=", "HEAD")
