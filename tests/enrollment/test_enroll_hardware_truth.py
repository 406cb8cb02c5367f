"""Issue 18, end to end: hosts whose tools replay ROCm 6.4/7.x and NVIDIA R570/R580 output shapes
enroll at the right tier through the real path (`fabric enroll` -> ansible-runner -> enroll.yml ->
parsers -> admission -> signed manifest).

The hosts run with `connection: local` and the fake tools first on PATH (no network namespaces, so
these tests do not need root or collide with other runs); what the playbook gathers is exactly what
an SSH run would gather from the same tools.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_fabric.documents import load_model
from llm_fabric.site.models import NodeManifest
from tests.fixtures.testhost import TestHost, TestHostFactory

FABRIC = str(Path(sys.executable).parent / "fabric")
pytestmark = pytest.mark.slow


@pytest.fixture
def local_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestHostFactory]:
    factory = TestHostFactory(tmp_path_factory.mktemp("hosts"), use_netns=False)
    try:
        yield factory
    finally:
        factory.close()


def enroll(site: Path, host: TestHost, name: str) -> subprocess.CompletedProcess[str]:
    args = [FABRIC, "enroll", *host.cli_args(), "--site-repo", str(site), "--owner", "cerit-sc", "--site", "brno",
            "--name", name, "--json"]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, env=host.env(), timeout=180)


def check(out: dict[str, object], check_id: str) -> dict[str, object]:
    checks = out["checks"]
    assert isinstance(checks, list)
    found: dict[str, object] = next(c for c in checks if c["id"] == check_id)
    return found


@pytest.mark.parametrize(
    ("profile", "tier", "rc", "model", "count"),
    [
        ("mi355x8", "full", 0, "mi355x", 8),
        ("mi325x8", "full", 0, "mi325x", 8),
        ("gh200x1", "limited", 0, "gh200", 1),
        ("mi300x8cpx", "rejected", 3, "mi300x", 8),
        ("v100x8", "rejected", 3, "v100-sxm2-32gb", 8),
    ],
)
def test_issue_18_hosts_enroll_at_the_right_tier(
    site_repo: Path, local_host: TestHostFactory, profile: str, tier: str, rc: int, model: str, count: int
) -> None:
    host = local_host.make(profile)
    proc = enroll(site_repo, host, "box")
    assert proc.returncode == rc, proc.stderr
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    assert (out["tier"], out["gpus"]["model"], out["gpus"]["count"]) == (tier, model, count)
    if profile == "v100x8":
        assert check(out, "fp8_hardware")["status"] == "fail"
        assert "no FP8 in hardware" in str(check(out, "fp8_hardware")["detail"])
    if profile == "mi300x8cpx":
        partition = check(out, "mig_disabled")
        assert partition["status"] == "fail"
        assert "8 physical mi300x GPUs in CPX mode, listed as 64 GPUs" in str(partition["detail"])
        assert out["gpus"]["memory_gb_total"] == pytest.approx(8 * 196592 * 2**20 / 1e9, abs=0.1)
    if rc != 0:
        assert not (site_repo / "nodes" / "box.yaml").exists()
        return
    manifest = load_model(site_repo / "nodes" / "box.yaml", NodeManifest)
    assert manifest.tier == tier and manifest.gpus.count == count and manifest.gpus.catalog_id == model
    if profile.startswith("mi3"):
        # the amdgpu module's version (amd-smi version / modinfo), the unit of the kernel matrix's floor
        assert check(out, "driver_floor")["status"] == "pass"
        assert manifest.gpus.driver_version == {"mi355x8": "6.14.14", "mi325x8": "6.12.12"}[profile]
        assert check(out, "mig_disabled")["status"] == "pass"  # SPX, reported by `static --partition`
    if profile == "mi355x8":
        ports = manifest.host.rdma
        assert [(p.device, p.link_layer, p.rate_gbps, p.state) for p in ports[:1]] == [
            ("mlx5_0", "InfiniBand", 400.0, "ACTIVE")
        ]
        assert len(ports) == 8 and [p.usable for p in ports].count(True) == 7  # the last port is down
    assert (
        subprocess.run([FABRIC, "nodes", "verify", "--site-repo", str(site_repo)], capture_output=True).returncode == 0
    )


def test_in_kernel_amdgpu_is_admitted_with_a_warning_not_read_as_a_driver_version(
    site_repo: Path, local_host: TestHostFactory
) -> None:
    """amd-smi prints the kernel's banner as the driver version (`Linuxversion6.17.0(...)`), modinfo an
    empty line: the fabric says "in-kernel" and checks the ROCm user space instead of a module floor."""
    proc = enroll(site_repo, local_host.make("mi355x8inkernel"), "kernel-box")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    driver = check(out, "driver_floor")
    assert driver["status"] == "warn" and str(driver["value"]).startswith("in-kernel (Linux ")
    assert "no module version to compare with the floor 6.14.14" in str(driver["detail"])
    assert "ROCm 7.0.2 >= 7.0" in str(driver["detail"])
    assert out["tier"] == "full"
