"""The model cache's read speed: dd's report parsed, the probe's outcomes judged, the real `fabric enroll` measuring
it over SSH into a test host and signing it into the manifest."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.cli.enroll_commands import enroll_command
from llm_fabric.documents import load_model
from llm_fabric.enrollment.admission import decide
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.facts import DEFAULT_MODELS_DIR, DEFAULT_READ_PROBE_MIB, ProbeResult
from llm_fabric.enrollment.parsers.storage_read import parse_dd_transfer, parse_read_probe
from llm_fabric.playbook_runner import run_playbook
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import key_id, sign_manifest, verify_manifest
from tests.fixtures.factsbundle import make_bundle
from tests.fixtures.testhost import TestHost

FABRIC = str(Path(sys.executable).parent / "fabric")

# dd's transfer line as GNU coreutils prints it (src/dd.c print_xfer_stats: "%s bytes (%s, %s) copied, %g s, %s"
# with SI units for the rate), in the variants a host may print: written for these tests in that format
GNU_GB = "536870912 bytes (537 MB, 512 MiB) copied, 0.281234 s, 1.9 GB/s"
GNU_MB = "67108864 bytes (67 MB, 64 MiB) copied, 0.182649 s, 367 MB/s"
GNU_KB = "1048576 bytes (1.0 MB, 1.0 MiB) copied, 2.51 s, 418 kB/s"
GNU_UNDER_1KB = "512 bytes copied, 0.000121 s, 4.2 MB/s"  # below 1 kB dd prints no (SI, IEC) sizes
GNU_COMMA = "67108864 bytes (67 MB, 64 MiB) copied, 0,182649 s, 367 MB/s"  # a locale with a decimal comma
GNU_NOTHING = "0 bytes copied, 0.00370001 s, 0.0 kB/s"
GNU_NO_TIME = "4096 bytes (4.1 kB, 4.0 KiB) copied, 0 s, Infinity B/s"


@pytest.mark.parametrize(
    ("line", "nbytes", "seconds", "reported"),
    [
        (GNU_GB, 536870912, 0.281234, 1900.0),
        (GNU_MB, 67108864, 0.182649, 367.0),
        (GNU_KB, 1048576, 2.51, 0.418),
        (GNU_UNDER_1KB, 512, 0.000121, 4.2),
        (GNU_COMMA, 67108864, 0.182649, 367.0),
    ],
)
def test_dd_transfer_lines(line: str, nbytes: int, seconds: float, reported: float) -> None:
    transfer = parse_dd_transfer(f"8+0 records in\n8+0 records out\n{line}\n")
    assert transfer is not None
    assert (transfer.bytes, transfer.seconds) == (nbytes, seconds)
    assert transfer.reported_mb_s == pytest.approx(reported)
    # the speed comes from the bytes and seconds; dd's own rounded rate agrees with it (decimal units)
    assert transfer.mb_s == pytest.approx(nbytes / seconds / 1e6)
    assert transfer.mb_s == pytest.approx(reported, rel=0.05)


def test_dd_lines_without_a_speed() -> None:
    nothing, no_time = parse_dd_transfer(GNU_NOTHING), parse_dd_transfer(GNU_NO_TIME)
    assert nothing is not None and nothing.bytes == 0 and nothing.mb_s is None
    assert no_time is not None and no_time.reported_mb_s is None and no_time.mb_s is None
    assert parse_dd_transfer("dd: failed to open '/x': Permission denied\n") is None


def _probe(method: str, fs: str = "xfs", line: str = GNU_GB) -> str:
    return f"dir /var/lib/llm-fabric/models\nfs {fs}\nmethod {method}\n4+0 records in\n4+0 records out\n{line}\n"


def test_probe_outcomes_say_how_the_page_cache_was_kept_out() -> None:
    direct = parse_read_probe(0, _probe("direct"))
    assert (direct.mb_s, direct.method) == (1909.0, "direct")
    assert direct.detail == "1909.0 MB/s reading 537 MB from /var/lib/llm-fabric/models (xfs), O_DIRECT"
    dropped = parse_read_probe(0, _probe("nocache", fs="overlayfs"))
    assert dropped.mb_s == 1909.0 and "after dropping its pages (posix_fadvise)" in dropped.detail
    # a read that only reached the page cache is not passed off as the disk's speed
    cached = parse_read_probe(0, _probe("cached"))
    assert cached.mb_s is None and cached.method == "cached"
    assert "came from the page cache" in cached.detail and "not recorded" in cached.detail
    # on tmpfs the page cache is the storage: recorded, and labelled so
    memory = parse_read_probe(0, _probe("direct", fs="tmpfs"))
    assert memory.mb_s == 1909.0 and "page cache, the model cache is in memory (no disk)" in memory.detail


def test_failed_probes_give_no_speed_and_say_why() -> None:
    error = "cannot write /proc/.fabric-read-probe-1: dd: failed to open: Permission denied"
    result = parse_read_probe(1, f"dir /proc\nfs proc\nerror {error}\n")
    assert result.mb_s is None
    assert result.detail == f"not measured: {error}"
    assert parse_read_probe(1, "").detail == "not measured: the probe exited with status 1"
    assert "no dd read report" in parse_read_probe(0, "dir /x\nfs xfs\nmethod direct\nKilled\n").detail
    assert "turned off" in parse_read_probe(0, "skipped").detail


def test_the_storage_read_check_warns_below_the_threshold_and_when_unmeasured() -> None:
    bundle = make_bundle("h100x8")
    assert decide(inventory_from_bundle(bundle)).check("storage_read").status == "warn"  # no probe in the bundle
    assert "the facts have no read probe" in decide(inventory_from_bundle(bundle)).check("storage_read").detail
    bundle.probes["storage_read"] = ProbeResult(rc=0, stdout=_probe("direct"))
    fast = decide(inventory_from_bundle(bundle))
    check = fast.check("storage_read")
    assert (check.status, check.value, check.threshold) == ("pass", 1909.0, 1000)
    assert fast.tier == "full"
    bundle.probes["storage_read"] = ProbeResult(rc=0, stdout=_probe("direct", line=GNU_MB))
    slow = decide(inventory_from_bundle(bundle))
    assert (slow.check("storage_read").status, slow.check("storage_read").value) == ("warn", 367.4)
    assert slow.tier == "full"  # informational: a slow disk never changes the tier


def test_cli_defaults_are_the_core_defaults() -> None:
    defaults = {p.name: p.default for p in enroll_command.params}
    assert (defaults["model_cache"], defaults["read_probe_mib"]) == (DEFAULT_MODELS_DIR, DEFAULT_READ_PROBE_MIB)


def test_a_manifest_signed_before_the_field_still_verifies(site_repo: Path) -> None:
    # the example nodes were signed before storage_read_mb_s existed: the file has no such key
    path = site_repo / "nodes" / "hgx-h200-ceitec.yaml"
    assert "storage_read_mb_s" not in path.read_text()
    old = load_model(path, NodeManifest)
    assert old.host.storage_read_mb_s is None
    key = Ed25519PrivateKey.generate()
    keys = {key_id(key.public_key()): key.public_key()}
    old = sign_manifest(old, key)
    assert verify_manifest(old, keys) is None
    # once set, the field is signed like any other: adding or changing it afterwards is detected
    measured = old.model_copy(update={"host": old.host.model_copy(update={"storage_read_mb_s": 2500.0})})
    assert verify_manifest(measured, keys) is not None
    resigned = sign_manifest(measured, key)
    assert verify_manifest(resigned, keys) is None
    faster = resigned.model_copy(update={"host": resigned.host.model_copy(update={"storage_read_mb_s": 9000.0})})
    assert verify_manifest(faster, keys) is not None


def _enroll(site: Path, host: TestHost, *extra: str) -> subprocess.CompletedProcess[str]:
    env = host.env() if host.connection == "local" else None
    return subprocess.run(
        [FABRIC, "enroll", *host.cli_args(), "--site-repo", str(site), "--owner", "cerit-sc", "--site", "brno",
         "--name", "box", "--json", *extra],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.netns
@pytest.mark.slow
def test_enroll_measures_the_model_cache_disk_and_signs_it(
    site_repo: Path, make_test_host: Callable[..., TestHost], tmp_path: Path
) -> None:
    host = make_test_host("h100x8")
    # the test host shares this machine's file system; the cache folder does not exist yet: its parent is measured
    cache = tmp_path / "disk" / "llm-fabric" / "models"
    cache.parent.parent.mkdir()
    proc = _enroll(site_repo, host, "--model-cache", str(cache), "--read-probe-mib", "16")
    assert proc.returncode == 0, proc.stderr
    check = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "storage_read")
    manifest = load_model(site_repo / "nodes" / "box.yaml", NodeManifest)
    speed = manifest.host.storage_read_mb_s
    assert speed is not None and speed > 0
    assert check["value"] == speed and check["threshold"] == 1000
    assert f"MB/s reading 17 MB from {cache.parent.parent} (" in check["detail"]
    assert next(c for c in manifest.checks if c.id == "storage_read").detail == check["detail"]
    assert list(cache.parent.parent.iterdir()) == []  # the probe's file is gone
    verify = subprocess.run([FABRIC, "nodes", "verify", "--site-repo", str(site_repo)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr


@pytest.mark.netns
@pytest.mark.slow
def test_a_failed_measurement_warns_and_still_enrolls(site_repo: Path, make_test_host: Callable[..., TestHost]) -> None:
    host = make_test_host("h100x8")
    # /proc takes no files: the probe cannot write, the machine is enrolled without a speed
    proc = _enroll(site_repo, host, "--model-cache", "/proc/llm-fabric/models", "--read-probe-mib", "4")
    assert proc.returncode == 0, proc.stderr
    check = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "storage_read")
    assert check["status"] == "warn" and check["value"] is None
    assert check["detail"].startswith("not measured: cannot write /proc/.fabric-read-probe-")
    manifest_text = (site_repo / "nodes" / "box.yaml").read_text()
    assert "storage_read_mb_s" not in manifest_text or "storage_read_mb_s: null" in manifest_text
    assert load_model(site_repo / "nodes" / "box.yaml", NodeManifest).host.storage_read_mb_s is None


@pytest.mark.netns
@pytest.mark.slow
def test_a_model_cache_in_memory_is_labelled_so(
    site_repo: Path, make_test_host: Callable[..., TestHost], tmp_path: Path
) -> None:
    shm = Path("/dev/shm")
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(shm)], capture_output=True, text=True).stdout.strip()
    if fs != "tmpfs":
        pytest.skip("/dev/shm is not a tmpfs here")
    cache = shm / f"fabric-test-{tmp_path.name}"
    cache.mkdir()
    try:
        proc = _enroll(site_repo, make_test_host("h100x8"), "--model-cache", str(cache), "--read-probe-mib", "8")
        assert proc.returncode == 0, proc.stderr
        check = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "storage_read")
        assert check["value"] > 0 and "page cache, the model cache is in memory (no disk)" in check["detail"]
        assert list(cache.iterdir()) == []
    finally:
        cache.rmdir()


@pytest.mark.netns
@pytest.mark.slow
def test_the_always_task_removes_a_probe_file_left_behind(
    make_test_host: Callable[..., TestHost], tmp_path: Path
) -> None:
    # a probe shell killed before its own cleanup leaves its file: the playbook's `always` task removes it
    # (the probe itself is off here, so only that task can have removed the file)
    host = make_test_host("h100x8")
    left = tmp_path / ".fabric-read-probe-5eed-4242"
    left.write_bytes(b"x" * 4096)
    other = tmp_path / ".fabric-read-probe-0ther-4242"  # another run's file is not this run's to remove
    other.write_bytes(b"y")
    extravars = {
        "fabric_marker": "@@fabric-probe-5eed",
        "fabric_engine_cache_models_dir": str(tmp_path / "models"),
        "fabric_enroll_read_probe_mib": 0,
    }
    result = run_playbook("enroll.yml", [host.target()], extravars=extravars)
    assert result.succeeded, result.failures
    assert not left.exists() and other.exists()
