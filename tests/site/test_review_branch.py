"""A contributor onboarded on one review branch; commands that commit refuse uncommitted dependencies.

Chained through the real `fabric` and git: `tenants add --contributor --branch B` then `enroll --owner
... --branch B` (judged against B, not the checkout), the same with B checked out, and `tenants add` /
`enroll` over an uncommitted fabric.yaml (refused, exit 2, naming the file; nothing committed).
"""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.cli import fabric, git
from tests.fixtures.factsbundle import write_bundle


def _site(tmp_path: Path) -> tuple[Path, Path]:
    site = tmp_path / "site"
    assert fabric("init", str(site), "--example", "cerit-sc").returncode == 0
    facts = write_bundle(tmp_path / "gpu9.facts.json", "h200x4", uuid_salt="onboard", hostname="gpu9")
    return site, facts


def _add(site: Path, name: str, *extra: str) -> tuple[int, str]:
    done = fabric("tenants", "add", name, "-C", str(site), "--display-name", name, "--data-class", "public", *extra)
    return done.returncode, done.stdout + done.stderr


def _enroll(site: Path, facts: Path, owner: str, *extra: str) -> tuple[int, str]:
    done = fabric(
        "enroll", "gpu9", "--facts", str(facts), "-C", str(site), "--owner", owner, "--site", "brno", *extra
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def test_contributor_onboarded_on_one_branch(tmp_path: Path) -> None:
    site, facts = _site(tmp_path)
    rc, out = _add(site, "uni-x", "--contributor", "--branch", "onboard/x")
    assert rc == 0, out
    assert "added tenant uni-x: branch onboard/x" in out
    rc, out = _enroll(site, facts, "uni-x", "--branch", "onboard/x")
    assert rc == 0, out
    assert "committed gpu9.yaml to branch onboard/x" in out
    assert git(site, "log", "--format=%s", "onboard/x").splitlines()[:2] == [
        "enroll gpu9: full tier, 4x h200 (uni-x@brno)",
        "tenants: add uni-x (contributor)",
    ]
    assert not (site / "tenants" / "uni-x.yaml").exists()  # the checkout is as it was
    # another branch does not have the tenant: refused, saying which branch was judged
    rc, out = _enroll(site, facts, "uni-x", "--branch", "onboard/other")
    assert rc == 2
    assert "`uni-x` is not a contributor tenant of this federation (on branch onboard/other)" in out
    git(site, "checkout", "-q", "onboard/x")
    assert "(2 sites, 5 nodes, 32 gpus, 6 tenants, 7 deployments)" in fabric("validate", "-C", str(site)).stdout


def test_branch_checked_out_is_the_checkout(tmp_path: Path) -> None:
    site, facts = _site(tmp_path)
    git(site, "checkout", "-q", "-b", "onboard/y")
    rc, out = _add(site, "uni-y", "--contributor", "--branch", "onboard/y")
    assert rc == 0, out
    assert f"added tenant uni-y: {site / 'tenants' / 'uni-y.yaml'} (commit " in out
    rc, out = _enroll(site, facts, "uni-y", "--branch", "onboard/y")
    assert rc == 0, out
    assert f"registered {site / 'nodes' / 'gpu9.yaml'} (commit " in out
    assert git(site, "log", "-1", "--format=%s") == "enroll gpu9: full tier, 4x h200 (uni-y@brno)\n"
    assert git(site, "status", "--porcelain") == ""


def test_no_commit_over_an_uncommitted_fabric_yaml(tmp_path: Path) -> None:
    site, facts = _site(tmp_path)
    head = git(site, "rev-parse", "HEAD")
    config = site / "fabric.yaml"
    config.write_text(config.read_text() + "# an edit not committed yet\n")
    rc, out = _add(site, "uni-z")
    assert rc == 2
    assert "`fabric tenants add uni-z` depends on uncommitted changes: fabric.yaml" in out
    assert "commit them first" in out and "nothing was written" in out
    assert not (site / "tenants" / "uni-z.yaml").exists()
    rc, out = _enroll(site, facts, "cerit-sc")
    assert rc == 2
    assert "`fabric enroll` depends on uncommitted changes: fabric.yaml" in out
    assert git(site, "rev-parse", "HEAD") == head
    # onto a review branch the change is judged against the branch's committed files: the edit is ignored
    rc, out = _add(site, "uni-z", "--branch", "onboard/z")
    assert rc == 0, out
    assert "added tenant uni-z: branch onboard/z" in out


def test_unknown_reference_hint_lists_what_is_known(tmp_path: Path) -> None:
    site, _ = _site(tmp_path)
    tenant = site / "tenants" / "cerit-sc.yaml"
    tenant.write_text(tenant.read_text().replace("data_classes: [public, internal, sensitive]", "data_classes: [zzz]"))
    done = fabric("validate", "-C", str(site))
    assert done.returncode == 2
    assert "unknown data class `zzz`" in done.stderr + done.stdout
    assert "known: internal, public, sensitive" in done.stderr + done.stdout
    assert "classs" not in done.stderr + done.stdout
