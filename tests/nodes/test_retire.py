"""`fabric nodes retire`: drain.yml through real ansible-runner, then the re-signed manifest and its git commit.

There is no Kubernetes API server here, so a successful drain talks to a recording stand-in for kubectl
(it prints what kubectl prints and logs its arguments); failures use the real kubectl, which refuses a
kubeconfig context that does not exist.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.documents import load_model
from llm_fabric.enrollment.registry import verify_nodes
from llm_fabric.errors import PolicyRefusal, UsageError
from llm_fabric.nodes.retire import DrainOptions, retire_node
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import default_private_key_path, load_private_key
from tests.fixtures.testhost import TestHost

FABRIC = str(Path(sys.executable).parent / "fabric")
NODE = "hgx-h200-ceitec"  # declared in the reference site, at site brno (cluster cerit-brno)

RECORDING_KUBECTL = """#!/bin/sh
# records its arguments; prints what kubectl prints for a node with one serving pod
echo "$*" >> "{log}"
while [ "$1" = "--context" ]; do shift 2; done
case "$1" in
  cordon) echo "node/$2 cordoned" ;;
  drain) echo "node/$2 already cordoned"; echo "evicting pod llm-fabric/qwen3-0"; echo "pod/qwen3-0 evicted";
         echo "node/$2 drained" ;;
  *) echo "unexpected kubectl call: $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def kubectl(tmp_path: Path) -> tuple[Path, Path]:
    """(path of the recording kubectl, its log)."""
    log = tmp_path / "kubectl.log"
    path = tmp_path / "bin" / "kubectl"
    path.parent.mkdir()
    path.write_text(RECORDING_KUBECTL.format(log=log))
    path.chmod(0o755)
    return path, log


def _head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout


def _key(repo: Path) -> Ed25519PrivateKey:
    return load_private_key(default_private_key_path(repo))


@pytest.mark.slow
def test_retire_drains_then_marks_signs_and_commits(site_repo: Path, kubectl: tuple[Path, Path]) -> None:
    path, log = kubectl
    result = retire_node(site_repo, NODE, _key(site_repo), drain=DrainOptions(kubectl=str(path)))
    assert result.drain is not None and result.drain.succeeded and result.drain.changed == 2
    calls = log.read_text().splitlines()
    assert calls[0] == f"--context cerit-brno cordon {NODE}"  # context = fabric.yaml sites.brno.cluster.name
    assert calls[1].startswith(f"--context cerit-brno drain {NODE} --ignore-daemonsets --delete-emptydir-data")
    assert calls[1].endswith("--timeout=15m") and len(calls) == 2
    assert load_model(site_repo / "nodes" / f"{NODE}.yaml", NodeManifest).status == "retired"
    assert all(s.problem is None for s in verify_nodes(site_repo))  # re-signed, not hand-edited
    subject = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=site_repo, capture_output=True, text=True)
    assert subject.stdout.strip() == f"retire {NODE}"
    # a second retire neither drains nor commits
    again = retire_node(site_repo, NODE, _key(site_repo), drain=DrainOptions(kubectl=str(path)))
    assert again.drain is None and again.registration.commit is None and len(log.read_text().splitlines()) == 2


@pytest.mark.slow
def test_failed_drain_leaves_the_manifest_and_history_alone(
    site_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.which("kubectl")
    if real is None:
        pytest.skip("kubectl is not installed: the failing drain needs the real kubectl")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "empty-kubeconfig"))  # no context cerit-brno in it
    manifest = site_repo / "nodes" / f"{NODE}.yaml"
    before, head = manifest.read_bytes(), _head(site_repo)
    with pytest.raises(UsageError) as exc:
        retire_node(site_repo, NODE, _key(site_repo), drain=DrainOptions(kubectl=real))
    assert 'context "cerit-brno" does not exist' in exc.value.message and "--no-drain" in (exc.value.hint or "")
    assert manifest.read_bytes() == before and _head(site_repo) == head


def test_refusals_come_before_the_cluster_is_touched(site_repo: Path, kubectl: tuple[Path, Path]) -> None:
    path, log = kubectl
    with pytest.raises(UsageError, match="was not found"):
        retire_node(site_repo, NODE, _key(site_repo), drain=DrainOptions(kubectl=str(path.parent / "nope")))
    with pytest.raises(UsageError, match="not a duration"):
        retire_node(site_repo, NODE, _key(site_repo), drain=DrainOptions(kubectl=str(path), timeout="soon"))
    manifest = site_repo / "nodes" / f"{NODE}.yaml"
    manifest.write_text(manifest.read_text().replace("owner: ceitec-structural", "owner: cerit-sc"))
    with pytest.raises(PolicyRefusal, match="refused to retire"):
        retire_node(site_repo, NODE, _key(site_repo), drain=DrainOptions(kubectl=str(path)))
    assert not log.exists()


def fabric(*args: str, path_first: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env.get('PATH', '')}"
    return subprocess.run([FABRIC, *args], capture_output=True, text=True, env=env, timeout=120, check=False, cwd=cwd)


@pytest.mark.slow
def test_cli_no_drain_only_marks(site_repo: Path, kubectl: tuple[Path, Path]) -> None:
    path, log = kubectl
    # a relative --site-repo, as people type it
    proc = fabric(
        "nodes", "retire", NODE, "--site-repo", site_repo.name, "--no-drain",
        path_first=path.parent, cwd=site_repo.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"{NODE}: not drained (--no-drain)" in proc.stdout and "retired" in proc.stdout
    assert not log.exists()
    assert load_model(site_repo / "nodes" / f"{NODE}.yaml", NodeManifest).status == "retired"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=site_repo, capture_output=True, text=True, check=True)
    assert status.stdout == ""  # committed, nothing left staged or dirty


@pytest.mark.netns
@pytest.mark.slow
def test_enrolled_test_host_is_drained_and_retired(
    site_repo: Path, make_test_host: Callable[..., TestHost], kubectl: tuple[Path, Path]
) -> None:
    """The whole path: enroll a machine over SSH, retire it with the kubectl found on PATH."""
    host = make_test_host("h100x8")
    env_path = host.tool_dir if host.connection == "local" else None
    proc = fabric(
        "enroll", *host.cli_args(), "--site-repo", str(site_repo), "--owner", "cerit-sc", "--site", "brno",
        "--name", "gpu7", "--json", path_first=env_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tier"] == "full"
    path, log = kubectl
    proc = fabric(
        "nodes", "retire", "gpu7", "--site-repo", str(site_repo), "--drain-timeout", "90s", path_first=path.parent
    )
    assert proc.returncode == 0, proc.stderr
    assert "drain.yml: cordoned and drained gpu7 (kubectl --context cerit-brno), 2 changed" in proc.stdout
    assert log.read_text().splitlines()[1].endswith("--timeout=90s")
    assert load_model(site_repo / "nodes" / "gpu7.yaml", NodeManifest).status == "retired"
    assert fabric("nodes", "verify", "--site-repo", str(site_repo)).returncode == 0
