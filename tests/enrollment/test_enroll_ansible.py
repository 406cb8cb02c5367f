"""`fabric enroll` end to end: real ansible-runner over SSH into network-namespace test hosts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fabric.documents import load_model
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.facts import ReadProbe, gather
from llm_fabric.site.models import NodeManifest
from tests.fixtures.testhost import TestHost

FABRIC = str(Path(sys.executable).parent / "fabric")
pytestmark = [pytest.mark.netns, pytest.mark.slow]


def fabric(*args: str, host: TestHost | None = None) -> subprocess.CompletedProcess[str]:
    env = host.env() if host is not None and host.connection == "local" else None
    return subprocess.run([FABRIC, *args], capture_output=True, text=True, env=env, timeout=120)


def enroll(site: Path, host: TestHost, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return fabric(
        "enroll", *host.cli_args(), "--site-repo", str(site), "--owner", "cerit-sc", "--site", "brno",
        "--name", name, "--json", *extra, host=host,
    )  # fmt: skip


def test_probe_outputs_arrive_byte_for_byte(make_test_host: Callable[..., TestHost]) -> None:
    hosts = [make_test_host("h100x8"), make_test_host("mi300x4"), make_test_host("unreachable")]
    result = gather([h.target() for h in hosts], read_probe=ReadProbe(str(hosts[0].tool_dir.parent), 4))
    h100 = result.bundles[hosts[0].name].probes
    assert h100["nvidia_csv"].stdout == (hosts[0].tool_dir.parent / "data" / "nvidia-smi-query-gpu.csv").read_text()
    assert h100["rocm_smi"].rc == 127
    assert result.bundles[hosts[1].name].probes["rocminfo"].rc == 0
    assert hosts[2].name in result.unreachable
    assert inventory_from_bundle(result.bundles[hosts[1].name]).driver_version == "6.10.5"


@pytest.mark.parametrize(
    ("profile", "tier", "rc", "model", "count"),
    [
        ("h100x8", "full", 0, "h100-sxm", 8),
        ("mi300x4", "full", 0, "mi300x", 4),
        ("l40sx8", "limited", 0, "l40s", 8),
        ("a100x4", "rejected", 3, "a100-80gb", 4),
    ],
)
def test_enroll_verdicts(
    site_repo: Path, make_test_host: Callable[..., TestHost], profile: str, tier: str, rc: int, model: str, count: int
) -> None:
    host = make_test_host(profile)
    proc = enroll(site_repo, host, "node-a")
    assert proc.returncode == rc, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["tier"], out["gpus"]["model"], out["gpus"]["count"]) == (tier, model, count)
    assert {c["id"] for c in out["checks"]} >= {"fp8_hardware", "aggregate_memory", "driver_floor", "interconnect"}
    manifest_path = site_repo / "nodes" / "node-a.yaml"
    if tier == "rejected":
        assert out["manifest"] is None and not manifest_path.exists()
        assert next(c for c in out["checks"] if c["id"] == "fp8_hardware")["status"] == "fail"
        return
    manifest = load_model(manifest_path, NodeManifest)
    assert manifest.tier == tier and manifest.provenance == "enrolled" and len(manifest.gpus.uuids) == count
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=site_repo, capture_output=True, text=True).stdout
    assert log.startswith("enroll node-a")
    assert fabric("nodes", "verify", "--site-repo", str(site_repo)).returncode == 0
    assert fabric("validate", str(site_repo)).returncode == 0


def test_unreachable_and_garbage_are_usage_errors(site_repo: Path, make_test_host: Callable[..., TestHost]) -> None:
    proc = enroll(site_repo, make_test_host("unreachable"), "gone")
    assert proc.returncode == 2 and "unreachable" in proc.stderr and "Traceback" not in proc.stderr
    proc = enroll(site_repo, make_test_host("garbage"), "junk")
    assert proc.returncode == 2 and "could not parse the output of `nvidia-smi" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_reenroll_shows_swapped_gpu_and_refuses_claimed_uuids(
    site_repo: Path, make_test_host: Callable[..., TestHost]
) -> None:
    first = make_test_host("h100x4")
    assert enroll(site_repo, first, "box").returncode == 0
    swapped = make_test_host("h100x4")
    data = swapped.tool_dir.parent / "data"
    old_uuid = load_model(site_repo / "nodes" / "box.yaml", NodeManifest).gpus.uuids[3]
    new_uuid = "GPU-00000000-1111-2222-3333-444444444444"
    for f in data.iterdir():
        f.write_text(f.read_text().replace(old_uuid, new_uuid))
    proc = enroll(site_repo, swapped, "box")
    assert proc.returncode == 0, proc.stderr
    changes = json.loads(proc.stdout)["changes"]
    assert f"GPU removed: {old_uuid}" in changes and f"GPU added: {new_uuid}" in changes
    # the same GPUs under another name: refused
    proc = enroll(site_repo, swapped, "other-box")
    assert proc.returncode == 3 and "already registered under node `box`" in proc.stderr


def test_facts_bundle_then_air_gapped_enroll(
    site_repo: Path, make_test_host: Callable[..., TestHost], tmp_path: Path
) -> None:
    host = make_test_host("h200x4")
    bundle = tmp_path / "h200.facts.json"
    assert fabric("facts", *host.cli_args(), "-o", str(bundle), host=host).returncode == 0
    proc = fabric(
        "enroll", "h200", "--facts", str(bundle), "--site-repo", str(site_repo), "--owner", "cerit-sc",
        "--site", "brno", "--name", "h200-box", "--dry-run", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tier"] == "full" and not (site_repo / "nodes" / "h200-box.yaml").exists()


def test_retire_then_reenroll_elsewhere(site_repo: Path, make_test_host: Callable[..., TestHost]) -> None:
    host = make_test_host("h100x8")
    assert enroll(site_repo, host, "old-name").returncode == 0
    # the machine moves on: no Kubernetes node to drain (the drain itself: tests/deploy/test_retire.py)
    assert fabric("nodes", "retire", "old-name", "--site-repo", str(site_repo), "--no-drain").returncode == 0
    assert load_model(site_repo / "nodes" / "old-name.yaml", NodeManifest).status == "retired"
    assert enroll(site_repo, host, "new-name").returncode == 0
    assert fabric("nodes", "verify", "--site-repo", str(site_repo)).returncode == 0


def test_local_connection_takes_tools_from_path(site_repo: Path, make_test_host: Callable[..., TestHost]) -> None:
    host = make_test_host("l40sx8")
    env_host = TestHost(host.name, host.profile, "localhost", 0, "root", None, "local", host.tool_dir)
    proc = enroll(site_repo, env_host, "here")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tier"] == "limited"
