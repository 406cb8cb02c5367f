"""provision.yml through real ansible-runner against a test host (sshd in a network namespace, fake GPU tools)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.init import init_site
from llm_fabric.kube.options import StackOptions
from llm_fabric.nodes.provision import drain_node, node_checkpoints, provision_node, provision_vars
from llm_fabric.site.loader import load_site
from llm_fabric.site.weights_lock import LOCK_FILE, LockedCheckpoint, LockedFile, WeightsLock
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


CHECKPOINT, REVISION = "Qwen/Qwen3-0.6B", "c1899de289a04d12100db370d81485cdf75e47ca"


def _stage(models: Path) -> WeightsLock:
    """Files in the Hugging Face cache layout, hashed here, and the lock that pins them.

    The lock is made from site/weights_lock.py's models because `fabric weights stage` (another lane of
    this change) writes the real one; the lead chains the real stage with this role after the merge.
    As huggingface_hub does, one file is a blob linked from the snapshot, one a plain file.
    """
    repo = models / "hf" / "hub" / f"models--{CHECKPOINT.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    weights = b"\x00\x01safetensors" * 4096
    config = b'{"architectures": ["Qwen3ForCausalLM"]}\n'
    blob = repo / "blobs" / hashlib.sha256(weights).hexdigest()
    blob.parent.mkdir()
    blob.write_bytes(weights)
    (snapshot / "model.safetensors").symlink_to(Path("../../blobs") / blob.name)
    (snapshot / "config.json").write_bytes(config)
    files = [
        LockedFile(path=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        for name, data in (("config.json", config), ("model.safetensors", weights))
    ]
    return WeightsLock(checkpoints={CHECKPOINT: LockedCheckpoint(revision=REVISION, files=files)})


def test_the_lock_becomes_the_cache_roles_variable() -> None:
    node = load_site(REFERENCE).nodes[NODE]
    lock = WeightsLock(
        checkpoints={
            CHECKPOINT: LockedCheckpoint(revision=REVISION, files=[LockedFile(path="a", size=1, sha256="0" * 64)])
        }
    )
    extravars = provision_vars(node, StackOptions(site_repo=REFERENCE), "files", lock)
    assert extravars["fabric_engine_cache_weights"] == [
        {"checkpoint": CHECKPOINT, "revision": REVISION, "files": [{"path": "a", "size": 1, "sha256": "0" * 64}]}
    ]
    assert provision_vars(node, StackOptions(site_repo=REFERENCE), "files")["fabric_engine_cache_weights"] == []


@pytest.mark.netns
@pytest.mark.slow
def test_the_cache_role_verifies_staged_weights_against_the_lock(
    make_test_host: Callable[..., Any], tmp_path: Path
) -> None:
    host = make_test_host("h200x4")
    lock = _stage(tmp_path / "models")
    # the lock travels as the site repo's weights.lock, read by the site loader like `fabric provision` does
    root = init_site(tmp_path / "site", "cerit-sc").root
    (root / LOCK_FILE).write_text(yaml.safe_dump(lock.model_dump(mode="json"), sort_keys=False))
    site = load_site(root)
    assert site.weights_lock == lock

    def run() -> Any:
        return provision_node(
            site, NODE, host.target(), options=StackOptions(site_repo=root), mode="files", overrides=_paths(tmp_path)
        )

    first = run()
    assert first.succeeded, first.failures
    second = run()
    assert second.succeeded and second.changed == 0, second.stats

    snapshot = tmp_path / "models" / "hf" / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / REVISION
    blob = (snapshot / "model.safetensors").resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"!")  # same size, one byte changed
    (snapshot / "config.json").unlink()
    failed = run()
    assert not failed.succeeded
    message = next(f for f in failed.failures if "Refuse files" in f)
    expected = next(f.sha256 for f in lock.checkpoints[CHECKPOINT].files if f.path == "model.safetensors")
    found = hashlib.sha256(blob.read_bytes()).hexdigest()
    assert (
        f"differ from weights.lock: {snapshot / 'model.safetensors'} (expected sha256 {expected}, "
        f"{blob.stat().st_size} bytes; found sha256 {found}, {blob.stat().st_size} bytes)"
    ) in message
    assert f"missing (not staged): {snapshot / 'config.json'}." in message
    assert message.endswith("re-stage with `fabric weights stage`")
    # sizes only, as `-e fabric_engine_cache_weights_checksum=false` passes it (a string): the one changed byte
    # goes unseen, the missing file does not
    sizes_only = provision_node(
        site, NODE, host.target(), options=StackOptions(site_repo=root), mode="files",
        overrides=_paths(tmp_path) | {"fabric_engine_cache_weights_checksum": "false"},
    )  # fmt: skip
    message = next(f for f in sizes_only.failures if "Refuse files" in f)
    assert "differ from weights.lock" not in message and "missing (not staged)" in message


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


@pytest.mark.netns
@pytest.mark.slow
def test_a_node_provisioned_after_stage_checks_what_stage_pinned(
    make_test_host: Callable[..., Any], site_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chained: `fabric weights stage` (the real huggingface_hub, from a mirror on 127.0.0.1) writes the cache and
    weights.lock; `fabric provision --plan` of the node that serves it checks exactly those files."""
    from llm_fabric.cli.main import main
    from llm_fabric.engine.local.tiny_model import build_tiny_model
    from llm_fabric.plan.document import load_plan
    from llm_fabric.trust.sites import load_trusted_site
    from llm_fabric.weights.mirror import commit_of, hf_mirror

    checkpoint, node = "openai/gpt-oss-120b", "hgx-h100-tuwien"  # vienna's one deployment and its node
    plan_file, models = tmp_path / "plan.json", tmp_path / "models"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan_file)]) == 0
    with hf_mirror({checkpoint: build_tiny_model(tmp_path / "tiny")}) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        stage = ["weights", "stage", "-C", str(site_repo), "--plan", str(plan_file), "--cache", str(models)]
        assert main([*stage, "--site", "vienna"]) == 0
    site, plan = load_trusted_site(site_repo), load_plan(plan_file)
    assert set(site.weights_lock.checkpoints) == {checkpoint}

    host = make_test_host("h100x8")
    extravars = provision_vars(site.nodes[node], StackOptions(site_repo=site_repo), "files", site.weights_lock)
    assert [w["checkpoint"] for w in extravars["fabric_engine_cache_weights"]] == [checkpoint]

    # the H100 test host replays an H100's driver: a Blackwell node's floor is lowered to it (not under test here)
    paths = _paths(tmp_path) | {"fabric_preflight_min_driver": "550"}

    def run(name: str) -> Any:
        options = StackOptions(site_repo=site_repo)
        return provision_node(site, name, host.target(), options=options, mode="files", overrides=paths, plan=plan)

    assert run(node).succeeded
    snapshot = models / "hf" / "hub" / "models--openai--gpt-oss-120b" / "snapshots" / commit_of(checkpoint)
    (snapshot / "tokenizer.json").resolve().write_text("{}")
    failed = run(node)
    assert not failed.succeeded
    message = next(f for f in failed.failures if "Refuse files" in f)
    assert f"differ from weights.lock: {snapshot / 'tokenizer.json'}" in message
    # a node whose replicas load none of the locked checkpoints is not asked for them; without the plan it is
    others = sorted(n for n in site.nodes if not any(n in r.nodes for r in plan.replicas_of("gpt-oss-120b")))
    assert others, "the reference federation has nodes that serve no gpt-oss-120b replica"
    assert checkpoint not in node_checkpoints(site, plan, others[0])
    assert run(others[0]).succeeded
    without_plan = provision_node(site, others[0], host.target(), options=StackOptions(site_repo=site_repo),
                                  mode="files", overrides=paths)  # fmt: skip
    assert not without_plan.succeeded and any("tokenizer.json" in f for f in without_plan.failures)
