"""The trust model on real git site repos: keys judged by the base revision, untrusted nodes refused everywhere,
retirement that a restored manifest cannot undo, GPU identity required (docs/security.md).

Each test reproduces a defect of issue 20 with the commands an attacker or a careless operator would run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.cli.main import main
from llm_fabric.documents import load_model
from llm_fabric.enrollment.facts import save_bundle
from llm_fabric.enrollment.registry import manifest_text, sign_file
from llm_fabric.site.gitrepo import commit_paths, git
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import default_private_key_path, load_private_key, sign_manifest
from tests.fixtures.factsbundle import make_bundle

NODE = "dgx-b200-01"


def _federation_key(site: Path) -> Ed25519PrivateKey:
    return load_private_key(default_private_key_path(site))


def _write_pub(path: Path, key: Ed25519PrivateKey) -> None:
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pem)


def _forged_node(site: Path, name: str, key: Ed25519PrivateKey, *, fresh_uuids: bool = True) -> Path:
    """A copy of the example's B200 node under `name`, signed with `key`."""
    node = load_model(site / "nodes" / f"{NODE}.yaml", NodeManifest)
    gpus = node.gpus
    if fresh_uuids:
        gpus = gpus.model_copy(update={"uuids": [f"GPU-{name}-{i:04d}-forged" for i in range(gpus.count)]})
    update = {"name": name, "gpus": gpus, "status": "active", "provenance": "enrolled", "signature": None}
    forged = node.model_copy(update=update)
    path = site / "nodes" / f"{name}.yaml"
    write_atomic(path, manifest_text(sign_manifest(forged, key)))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_change_cannot_add_the_key_that_signs_it(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    attacker = Ed25519PrivateKey.generate()
    _write_pub(site_repo / "keys" / "attacker.pub", attacker)
    node = _forged_node(site_repo, "rogue-box", attacker)
    assert commit_paths(site_repo, [site_repo / "keys", node], "add a machine") is not None

    code, out = _run(capsys, "validate", "-C", str(site_repo), "--base", "HEAD~1")
    assert code == 3, out
    assert "key change: key" in out and "attacker.pub" in out and "no endorsement" in out
    code, out = _run(capsys, "validate", "-C", str(site_repo), "--base", "HEAD~1", "--json")
    report = json.loads(out)
    assert report["exit_code"] == 3 and any("added" in c for c in report["key_changes"])
    # nodes are judged by the base's keys: the rogue node is untrusted too
    assert any("rogue-box" in v["message"] for v in report["violations"])

    code, out = _run(capsys, "plan", "-C", str(site_repo), "--base", "HEAD~1")
    assert code == 3 and "key change" in out and "attacker.pub" in out


def test_a_replaced_key_is_refused_and_listed(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    attacker = Ed25519PrivateKey.generate()
    keys = sorted((site_repo / "keys").glob("*.pub"))
    _write_pub(keys[0], attacker)
    for path in sorted((site_repo / "nodes").glob("*.yaml")):
        sign_file(path, attacker)
    assert commit_paths(site_repo, [site_repo / "keys", site_repo / "nodes"], "rotate") is not None
    code, out = _run(capsys, "validate", "-C", str(site_repo), "--base", "HEAD~1")
    assert code == 3 and "replaced" in out
    # without a base the repo's own keys are the root: the same tree is valid (why CI runs --base)
    assert _run(capsys, "validate", "-C", str(site_repo))[0] == 0


def test_an_endorsed_key_is_accepted_and_listed(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = Ed25519PrivateKey.generate()
    _write_pub(tmp_path / "operator-2027.pub", new)
    key = str(default_private_key_path(site_repo))
    code, out = _run(capsys, "keys", "add", str(tmp_path / "operator-2027.pub"), "-C", str(site_repo), "--key", key)
    assert code == 0, out
    assert (site_repo / "keys" / "operator-2027.pub.endorsement").is_file()
    node = _forged_node(site_repo, "new-box", new)
    assert commit_paths(site_repo, [node], "enroll new-box with the new key") is not None

    code, out = _run(capsys, "validate", "-C", str(site_repo), "--base", "HEAD~2", "--json")
    report = json.loads(out)
    assert code == 0, report
    (change,) = report["key_changes"]
    assert "added" in change and "endorsed by trusted key" in change
    # the pull-request comment lists the accepted key change too
    code, out = _run(capsys, "plan", "-C", str(site_repo), "--base", "HEAD~2", "--format", "markdown")
    assert code == 0 and "### Key changes" in out and "operator-2027.pub" in out

    # an endorsement by an untrusted key is refused
    other = Ed25519PrivateKey.generate()
    _write_pub(tmp_path / "other.pub", other)
    code, out = _run(capsys, "keys", "add", str(tmp_path / "other.pub"), "-C", str(site_repo), "--key", key)
    assert code == 0
    endorsement = site_repo / "keys" / "other.pub.endorsement"
    forged = json.loads(endorsement.read_text())
    forged["signer"] = "0000000000000000"
    endorsement.write_text(json.dumps(forged))
    assert commit_paths(site_repo, [endorsement], "tamper") is not None
    code, out = _run(capsys, "validate", "-C", str(site_repo), "--base", "HEAD~2")
    assert code == 3 and "not trust" in out


def test_plan_and_render_refuse_a_node_signed_by_an_unknown_key(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _forged_node(site_repo, "rogue-box", Ed25519PrivateKey.generate())
    code, out = _run(capsys, "plan", "-C", str(site_repo))
    assert code == 3 and "rogue-box" in out and "not a trusted key" in out
    code, out = _run(capsys, "render", "--site", "brno", "-C", str(site_repo), "--out", str(tmp_path / "out"))
    assert code == 3 and "rogue-box" in out
    assert not (tmp_path / "out").exists()
    code, out = _run(capsys, "provision", NODE, "--site-repo", str(site_repo), "--check")
    assert code == 3 and "rogue-box" in out


def test_restoring_a_retired_nodes_old_manifest_is_refused(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "nodes", "retire", NODE, "-C", str(site_repo), "--no-drain")
    assert code == 0, out
    assert (site_repo / "retired" / f"{NODE}.yaml").is_file()
    old = git(site_repo, "show", f"HEAD~1:nodes/{NODE}.yaml")
    (site_repo / "nodes" / f"{NODE}.yaml").write_text(old)
    # the old manifest's signature is genuine: only the retirement record tells it is a replay
    assert _run(capsys, "nodes", "verify", "-C", str(site_repo))[0] == 0
    code, out = _run(capsys, "validate", "-C", str(site_repo))
    assert code == 3 and "was retired" in out
    assert _run(capsys, "plan", "-C", str(site_repo))[0] == 3

    # deleting the record as well is caught against the base revision
    (site_repo / "retired" / f"{NODE}.yaml").unlink()
    assert commit_paths(site_repo, [site_repo / "nodes", site_repo / "retired"], "bring it back") is not None
    code, out = _run(capsys, "validate", "-C", str(site_repo), "--base", "HEAD~1")
    assert code == 3 and "retirement record" in out and "restores its manifest" in out


def test_an_interrupted_retire_is_completed_by_the_rerun(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The state a kill between the write and the commit left: `retired` on disk, nothing committed."""
    path = site_repo / "nodes" / f"{NODE}.yaml"
    current = load_model(path, NodeManifest)
    half = sign_manifest(current.model_copy(update={"status": "retired"}), _federation_key(site_repo))
    write_atomic(path, manifest_text(half))
    code, out = _run(capsys, "nodes", "retire", NODE, "-C", str(site_repo), "--no-drain")
    assert code == 0, out
    assert git(site_repo, "status", "--porcelain").strip() == ""
    assert git(site_repo, "log", "-1", "--format=%s").strip() == f"retire {NODE}"
    assert (site_repo / "retired" / f"{NODE}.yaml").is_file()


def test_gpus_without_identity_are_refused(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = _federation_key(site_repo)
    path = _forged_node(site_repo, "na-box", key)
    node = load_model(path, NodeManifest)
    na = node.gpus.model_copy(update={"uuids": ["[N/A]"] * node.gpus.count})
    write_atomic(path, manifest_text(sign_manifest(node.model_copy(update={"gpus": na, "signature": None}), key)))
    code, out = _run(capsys, "validate", "-C", str(site_repo))
    assert code == 3 and "is not a GPU UUID" in out

    one = node.gpus.model_copy(update={"uuids": ["GPU-11111111-2222-3333-4444-555555555555"] * node.gpus.count})
    write_atomic(path, manifest_text(sign_manifest(node.model_copy(update={"gpus": one, "signature": None}), key)))
    code, out = _run(capsys, "validate", "-C", str(site_repo))
    assert code == 3 and "more than one GPU" in out
    assert _run(capsys, "plan", "-C", str(site_repo))[0] == 3


def test_enroll_refuses_a_machine_whose_gpus_report_no_uuid(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = make_bundle("h100x8", uuid_salt="na")
    for probe in bundle.probes.values():
        if probe.stdout:
            probe.stdout = re.sub(r"GPU-[0-9a-f-]{36}", "[N/A]", probe.stdout)
    save_bundle(bundle, tmp_path / "na.facts.json")
    args = ["enroll", "na", "--facts", str(tmp_path / "na.facts.json"), "-C", str(site_repo)]
    code, out = _run(capsys, *args, "--owner", "cerit-sc", "--site", "brno", "--name", "na-box")
    assert code == 3 and "UUID" in out
    assert not (site_repo / "nodes" / "na-box.yaml").exists()


def test_retired_nodes_release_their_gpus(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # while the node is active its GPUs are taken: the same UUIDs under another name are refused (the
    # duplicate-UUID check, without which this test would pass for the wrong reason)
    twin = _forged_node(site_repo, "b200-renamed", _federation_key(site_repo), fresh_uuids=False)
    code, out = _run(capsys, "validate", "-C", str(site_repo))
    assert code == 2 and "b200-renamed" in out and "GPU-" in out and "uuid" in out.lower(), out
    twin.unlink()
    assert _run(capsys, "nodes", "retire", NODE, "-C", str(site_repo), "--no-drain")[0] == 0
    # the documented path: the same machine enrolled again under another name, same GPUs
    _forged_node(site_repo, "b200-renamed", _federation_key(site_repo), fresh_uuids=False)
    code, out = _run(capsys, "validate", "-C", str(site_repo))
    assert code == 0, out


def test_a_keyring_outside_the_repo_is_a_trust_root_too(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyring = tmp_path / "keyring"
    keyring.mkdir()
    for pub in (site_repo / "keys").glob("*.pub"):
        (keyring / pub.name).write_bytes(pub.read_bytes())
    assert _run(capsys, "validate", "-C", str(site_repo), "--keyring", str(keyring))[0] == 0
    attacker = Ed25519PrivateKey.generate()
    _write_pub(site_repo / "keys" / "attacker.pub", attacker)
    _forged_node(site_repo, "rogue-box", attacker)
    # no base revision needed: the keyring is the root, and the repo's new key is not in it
    assert _run(capsys, "validate", "-C", str(site_repo))[0] == 0  # judged by its own keys/, the repo looks fine
    code, out = _run(capsys, "validate", "-C", str(site_repo), "--keyring", str(keyring))
    assert code == 3 and "attacker.pub" in out and "rogue-box" in out
    code, out = _run(capsys, "plan", "-C", str(site_repo), "--keyring", str(keyring))
    assert code == 3 and "key change" in out
