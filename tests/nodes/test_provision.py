"""provision.yml through real ansible-runner against a test host (sshd in a network namespace, fake GPU tools)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.deploy.options import StackOptions
from llm_fabric.nodes.provision import drain_node, provision_node, provision_vars
from llm_fabric.site.loader import load_site
from tests.deploy.conftest import REFERENCE

NODE = "hgx-h200-ceitec"  # 4 x H200 on NVSwitch, like the h200x4 test host


def _paths(tmp: Path) -> dict[str, Any]:
    # the test host shares this machine's file system: every path the roles write goes under tmp
    return {
        "fabric_engine_cache_models_dir": str(tmp / "models"),
        "fabric_join_config_dir": str(tmp / "etc"),
        "fabric_join_kubelet_defaults": str(tmp / "default-kubelet"),
        # no systemd inside the test host; the check itself is covered by ansible-lint only
        "fabric_preflight_require_fabric_manager": False,
        # the system Python, not whatever interpreter discovery finds first on this shared machine
        "ansible_python_interpreter": "/usr/bin/python3",
    }


@pytest.fixture
def provision(make_test_host: Callable[..., Any], tmp_path: Path) -> Callable[..., Any]:
    host = make_test_host("h200x4")
    site = load_site(REFERENCE)

    def run(*, mode: str = "files", check: bool = False, **overrides: Any) -> Any:
        return provision_node(
            site,
            NODE,
            host.target(),
            options=StackOptions(site_repo=REFERENCE),
            mode=mode,
            check=check,
            overrides=_paths(tmp_path) | overrides,
        )

    return run


def test_vars_come_from_the_manifest_and_the_kernel_matrix() -> None:
    node = load_site(REFERENCE).nodes[NODE]
    extravars = provision_vars(node, StackOptions(site_repo=REFERENCE), "full")
    assert extravars["fabric_preflight_min_driver"] == "525.60.13"  # sm_90's floor in kernels/matrix.yaml
    assert extravars["fabric_kernels_packages"] == ["nvidia-fabricmanager-570"]
    assert extravars["fabric_join_labels"]["fabric.llm/owner"] == "ceitec-structural"
    assert extravars["fabric_join_labels"]["fabric.llm/gpu-model"] == "h200"


@pytest.mark.netns
@pytest.mark.slow
def test_files_mode_is_idempotent_and_labels_the_kubelet(provision: Callable[..., Any], tmp_path: Path) -> None:
    first = provision()
    assert first.succeeded, first.failures
    assert first.changed >= 4  # folders, node.yaml, kubelet defaults
    kubelet = (tmp_path / "default-kubelet").read_text()
    assert "--hostname-override=hgx-h200-ceitec" in kubelet
    assert "fabric.llm/owner=ceitec-structural" in kubelet and "fabric.llm/gpu-model=h200" in kubelet
    assert (tmp_path / "models" / "hf").is_dir()
    second = provision()
    assert second.succeeded and second.changed == 0, second.stats


@pytest.mark.netns
@pytest.mark.slow
def test_check_mode_changes_nothing(provision: Callable[..., Any], tmp_path: Path) -> None:
    result = provision(check=True)
    assert result.succeeded, result.failures
    assert result.changed > 0  # it reports what it would do
    assert not (tmp_path / "default-kubelet").exists() and not (tmp_path / "models").exists()


@pytest.mark.netns
@pytest.mark.slow
def test_preflight_refuses_a_driver_below_the_floor(provision: Callable[..., Any], tmp_path: Path) -> None:
    result = provision(fabric_preflight_min_driver="580.0")
    assert not result.succeeded
    assert any("driver 570.211.01 (floor 580.0)" in f for f in result.failures), result.failures
    assert not (tmp_path / "default-kubelet").exists()  # nothing is written after a failed preflight


def test_drain_marks_the_manifest_without_a_cluster(tmp_path: Path) -> None:
    manifest = tmp_path / f"{NODE}.yaml"
    manifest.write_text((REFERENCE / "nodes" / f"{NODE}.yaml").read_text())
    result = drain_node(NODE, manifest=manifest, status="retired", skip_kubectl=True)
    assert result.succeeded, result.failures
    assert "\nstatus: retired\n" in manifest.read_text()
    assert drain_node(NODE, manifest=manifest, status="retired", skip_kubectl=True).changed == 0


@pytest.mark.slow
def test_playbooks_are_ansible_lint_clean() -> None:
    root = Path(__file__).resolve().parents[2] / "playbooks"
    lint = Path(sys.executable).parent / "ansible-lint"
    result = subprocess.run(
        [str(lint), "--offline", "-q", str(root / "provision.yml"), str(root / "drain.yml"), str(root / "roles")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=root.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
