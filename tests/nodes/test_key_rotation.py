"""A key rotation on the reference site keeps every node verifying before, during and after it.

Real `fabric` processes and git: `keys rotate --branch` (the reviewed change), the merge, then
`keys retire OLD`; `fabric nodes verify` and `fabric validate` at every step.
"""

from __future__ import annotations

import re
from pathlib import Path

from llm_fabric.enrollment.registry import verify_nodes
from llm_fabric.trust.signatures import default_private_key_path, key_id, load_private_key
from tests.fixtures.cli import fabric, git
from tests.fixtures.factsbundle import write_bundle


def all_verify(site: Path) -> bool:
    statuses = verify_nodes(site)
    ok = bool(statuses) and all(s.problem is None for s in statuses)
    return (
        ok
        and fabric("nodes", "verify", "-C", str(site)).returncode == 0
        and fabric("validate", "-C", str(site)).returncode == 0
    )


def signers(site: Path) -> set[str]:
    return {s.manifest.signature.key_id for s in verify_nodes(site) if s.manifest and s.manifest.signature}


def test_rotation_keeps_every_node_verifying(site_repo: Path, tmp_path: Path) -> None:
    old_id = key_id(load_private_key(default_private_key_path(site_repo)).public_key())
    assert all_verify(site_repo) and signers(site_repo) == {old_id}  # before

    new_key = tmp_path / "new.key"
    out = fabric("keys", "rotate", "-C", str(site_repo), "--new-private-key", str(new_key), "--branch", "rotate")
    assert out.returncode == 0, out.stderr
    new_id = key_id(load_private_key(new_key).public_key())
    assert f"fabric keys retire {old_id}" in out.stdout
    assert all_verify(site_repo) and signers(site_repo) == {old_id}  # the checkout, untouched

    git(site_repo, "checkout", "-q", "rotate")  # during: the review branch
    assert all_verify(site_repo) and signers(site_repo) == {new_id}
    # CI judges the branch by main's keys: the new key is accepted because the old one endorsed it
    ci = fabric("validate", "-C", str(site_repo), "--base", "main")
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert f"key {new_id} added" in ci.stdout and f"endorsed by trusted key {old_id}" in ci.stdout
    assert len(list((site_repo / "keys").glob("*.pub"))) == 2
    git(site_repo, "checkout", "-q", "main")
    early = fabric("keys", "retire", old_id, "-C", str(site_repo))  # before it has landed: main has one key
    assert early.returncode == 2 and "only key" in early.stderr

    git(site_repo, "merge", "-q", "--ff-only", "rotate")  # landed
    assert all_verify(site_repo)
    # an enrolment signed with the old key meanwhile keeps the old key in place, by name
    bundle = write_bundle(tmp_path / "late.facts.json", "h100x8", uuid_salt="late")
    enroll = ["enroll", "late", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
    assert fabric(*enroll).returncode == 0
    refused = fabric("keys", "retire", old_id, "-C", str(site_repo))
    assert refused.returncode == 3 and "still signed by key" in refused.stderr and "late" in refused.stderr
    assert fabric(*enroll, "--key", str(new_key)).returncode == 0  # re-enrolled with the new key
    done = fabric("keys", "retire", old_id, "-C", str(site_repo))
    assert done.returncode == 0, done.stderr
    retired_ci = fabric("validate", "-C", str(site_repo), "--base", "HEAD~1")
    assert retired_ci.returncode == 0 and f"key {old_id} removed" in retired_ci.stdout
    assert all_verify(site_repo) and signers(site_repo) == {new_id}  # after
    assert [p.name for p in (site_repo / "keys").glob("*.pub")] == [f"enrollment-{new_id}.pub"]
    assert (site_repo / "keys" / "retired" / f"{old_id}.pub").is_file()
    assert git(site_repo, "status", "--porcelain") == ""

    # the new key signs from now on: a declared node edited and signed again verifies
    path = site_repo / "nodes" / "hgx-h200-ceitec.yaml"
    path.write_text(re.sub(r"tier: full", "tier: full  # checked", path.read_text()))
    assert fabric("nodes", "sign", "hgx-h200-ceitec", "-C", str(site_repo), "--key", str(new_key)).returncode == 0
    assert all_verify(site_repo)
    only = fabric("keys", "retire", new_id, "-C", str(site_repo))
    assert only.returncode == 2 and "only key" in only.stderr


def test_rotation_refuses_to_resign_an_edited_manifest(site_repo: Path, tmp_path: Path) -> None:
    path = site_repo / "nodes" / "dgx-b300-01.yaml"
    path.write_text(path.read_text().replace("count: 8", "count: 16"))
    head = git(site_repo, "rev-parse", "HEAD")
    out = fabric("keys", "rotate", "-C", str(site_repo), "--new-private-key", str(tmp_path / "n.key"))
    assert out.returncode == 3
    assert "dgx-b300-01.yaml" in out.stderr and "re-signing would vouch" in out.stderr
    assert git(site_repo, "rev-parse", "HEAD") == head
    assert not (tmp_path / "n.key").exists()
