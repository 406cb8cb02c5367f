"""Concurrent `fabric enroll` processes into one site repo lose nothing and cannot share a GPU.

Real processes, real git. To make the processes meet inside registration (and not merely run one
after another, which is what start-up jitter would mostly give), the test itself holds the
enrolment lock `.git/fabric-enroll.lock` while it starts them, waits until the kernel shows every
one of them queued on that lock (/proc/locks), then lets go: they all contend at the same instant.
Should registration stop taking the lock, the processes never queue, run straight through, and the
assertions below are what catch it (two nodes with one GPU; a lost or failed commit).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from llm_fabric.documents import load_model
from llm_fabric.site.models import NodeManifest
from tests.fixtures.factsbundle import write_bundle

FABRIC = str(Path(sys.executable).parent / "fabric")
PROC_LOCKS = Path("/proc/locks")
pytestmark = pytest.mark.skipif(not PROC_LOCKS.exists(), reason="needs Linux /proc/locks to see queued lock waiters")


def start_enroll(site: Path, bundle: Path, name: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FABRIC_ENROLLMENT_KEY"}
    args = [
        "enroll", bundle.stem, "--facts", str(bundle), "--site-repo", str(site), "--owner", "cerit-sc",
        "--site", "brno", "--name", name, "--json",
    ]  # fmt: skip
    return subprocess.Popen([FABRIC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _waiters(lock: Path) -> int:
    st = lock.stat()
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino} "
    return sum(1 for line in PROC_LOCKS.read_text().splitlines() if "->" in line and key in line)


@contextmanager
def gate(site: Path) -> Iterator[Path]:
    """Hold the enrolment lock for the body of the with-block (start the processes and `wait_queued` there)."""
    lock = site / ".git" / "fabric-enroll.lock"
    with open(lock, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield lock
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_queued(lock: Path, procs: list[subprocess.Popen[str]]) -> int:
    """How many processes were queued on the lock at once (all of them, unless some ended without queueing)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        queued = _waiters(lock)
        running = sum(1 for p in procs if p.poll() is None)
        if queued == len(procs) or queued == running:
            return queued
        time.sleep(0.05)
    return _waiters(lock)


def finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        out.append((proc.returncode, stdout, stderr))
    return out


def git(site: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=site, capture_output=True, text=True, check=True).stdout


def test_concurrent_enrolments_all_commit(site_repo: Path, tmp_path: Path) -> None:
    profiles = ["h100x8", "h100x8", "h200x4", "l40sx8", "h100x4"]
    bundles = [write_bundle(tmp_path / f"m{i}.facts.json", p, uuid_salt=f"m{i}") for i, p in enumerate(profiles)]
    names = [f"box-{i}" for i in range(len(bundles))]
    head_before = git(site_repo, "rev-parse", "HEAD").strip()
    with gate(site_repo) as lock:
        procs = [start_enroll(site_repo, b, n) for b, n in zip(bundles, names, strict=True)]
        queued = wait_queued(lock, procs)
    results = finish(procs)
    for name, (rc, stdout, stderr) in zip(names, results, strict=True):
        assert rc == 0, f"{name}: exit {rc}: {stderr}"
        assert json.loads(stdout)["node"] == name and json.loads(stdout)["commit"]
    # every node is in its own commit on top of the old head, and nothing is left uncommitted
    log = git(site_repo, "log", "--format=%s", f"{head_before}..HEAD").splitlines()
    assert sorted(line.split(":")[0] for line in log) == sorted(f"enroll {n}" for n in names)
    committed = git(site_repo, "ls-tree", "--name-only", "HEAD", "nodes/").split()
    assert {f"nodes/{n}.yaml" for n in names} <= set(committed)
    assert git(site_repo, "status", "--porcelain") == ""
    uuids = [u for n in names for u in load_model(site_repo / "nodes" / f"{n}.yaml", NodeManifest).gpus.uuids]
    assert len(uuids) == len(set(uuids)) == 8 + 8 + 4 + 8 + 4
    verify = subprocess.run([FABRIC, "nodes", "verify", "--site-repo", str(site_repo)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert queued == len(procs), f"only {queued} of {len(procs)} processes met at the enrolment lock"


def test_same_gpus_under_two_names_at_once_one_wins(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "twin.facts.json", "h100x8", uuid_salt="twin")
    names = ["twin-a", "twin-b"]
    with gate(site_repo) as lock:
        procs = [start_enroll(site_repo, bundle, n) for n in names]
        queued = wait_queued(lock, procs)
    results = finish(procs)
    codes = [rc for rc, _, _ in results]
    assert sorted(codes) == [0, 3], f"exit codes {codes}, stderr {[err[-300:] for _, _, err in results]}"
    winner = names[codes.index(0)]
    loser_err = next(err for rc, _, err in results if rc == 3)
    assert f"already registered under node `{winner}`" in loser_err and "Traceback" not in loser_err
    nodes = sorted(p.stem for p in (site_repo / "nodes").glob("twin-*.yaml"))
    assert nodes == [winner]
    assert git(site_repo, "log", "-1", "--format=%s").startswith(f"enroll {winner}:")
    assert git(site_repo, "status", "--porcelain") == ""
    assert queued == 2, "the two processes did not meet at the enrolment lock"
