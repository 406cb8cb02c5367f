"""`fabric enroll` tells the truth: a dry run gives the real run's verdict and exit code, NAME names the
node with --facts, names are checked with the rule in words, and --branch leaves the checkout alone.

Real `fabric` processes on saved facts bundles (what `fabric facts` writes), real git.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from llm_fabric.enrollment.registry import verify_nodes
from llm_fabric.site.gitrepo import show_file
from tests.fixtures.cli import fabric, git
from tests.fixtures.factsbundle import write_bundle


def enroll(site: Path, name: str, bundle: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return fabric(
        "enroll", name, "--facts", str(bundle), "-C", str(site), "--owner", "cerit-sc", "--site", "brno", *extra
    )


def test_dry_run_and_real_run_agree_on_gpus_registered_to_another_node(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "box.facts.json", "h100x8", uuid_salt="box")
    assert enroll(site_repo, "box-a", bundle).returncode == 0
    head = git(site_repo, "rev-parse", "HEAD")

    dry = enroll(site_repo, "box-b", bundle, "--dry-run")
    real = enroll(site_repo, "box-b", bundle)

    assert (dry.returncode, real.returncode) == (3, 3)
    assert dry.stderr == real.stderr
    assert "already registered under node `box-a`" in dry.stderr
    assert git(site_repo, "rev-parse", "HEAD") == head
    assert not (site_repo / "nodes" / "box-b.yaml").exists()


def test_dry_run_and_real_run_agree_when_admitted(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "box.facts.json", "h100x8", uuid_salt="fresh")
    dry = enroll(site_repo, "box-c", bundle, "--dry-run", "--json")
    real = enroll(site_repo, "box-c", bundle, "--json")
    assert (dry.returncode, real.returncode) == (0, 0)
    dry_out, real_out = json.loads(dry.stdout), json.loads(real.stdout)
    assert (dry_out["node"], dry_out["tier"]) == (real_out["node"], real_out["tier"]) == ("box-c", "full")
    assert dry_out["manifest"] is None and real_out["manifest"].endswith("nodes/box-c.yaml")


def test_facts_name_the_node_after_the_argument_not_the_bundles_hostname(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "x.facts.json", "h100x8", uuid_salt="n", hostname="localhost.localdomain")
    out = enroll(site_repo, "gpu7", bundle, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["node"] == "gpu7"
    assert (site_repo / "nodes" / "gpu7.yaml").is_file()


def test_a_bad_node_name_says_the_rule_and_a_valid_name(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "x.facts.json", "h100x8", uuid_salt="bad")
    out = enroll(site_repo, "GPU_7", bundle, "--dry-run")
    assert out.returncode == 2
    assert "lowercase letters, digits and '-'" in out.stderr
    assert "e.g. `gpu-7`" in out.stderr
    assert "Traceback" not in out.stderr


def test_branch_commits_for_review_and_leaves_the_checkout(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "x.facts.json", "h100x8", uuid_salt="review")
    head = git(site_repo, "rev-parse", "HEAD")
    out = enroll(site_repo, "gpu8", bundle, "--branch", "enroll/gpu8")
    assert out.returncode == 0, out.stderr
    assert "committed gpu8.yaml to branch enroll/gpu8" in out.stdout
    # the checkout: same commit, clean tree, no new file
    assert git(site_repo, "rev-parse", "HEAD") == head
    assert git(site_repo, "status", "--porcelain") == ""
    assert not (site_repo / "nodes" / "gpu8.yaml").exists()
    # the branch: one commit on top of HEAD holding the signed manifest; merged, every node verifies
    assert git(site_repo, "rev-list", "--count", f"{head.strip()}..enroll/gpu8").strip() == "1"
    assert "name: gpu8" in (show_file(site_repo, "enroll/gpu8", "nodes/gpu8.yaml") or "")
    git(site_repo, "merge", "-q", "--ff-only", "enroll/gpu8")
    assert [s.problem for s in verify_nodes(site_repo) if s.name == "gpu8"] == [None]
    assert fabric("validate", "-C", str(site_repo)).returncode == 0


def test_branch_that_is_checked_out_is_the_checkout(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "x.facts.json", "h100x8", uuid_salt="main")
    out = enroll(site_repo, "gpu9", bundle, "--branch", "main")
    assert out.returncode == 0, out.stderr
    assert f"registered {site_repo / 'nodes' / 'gpu9.yaml'} (commit " in out.stdout
    assert git(site_repo, "log", "-1", "--format=%s").startswith("enroll gpu9:")
