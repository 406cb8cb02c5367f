"""`fabric nodes cordon|uncordon`: a re-signed, committed status; the plan stops placing on the node;
nothing is drained. `fabric nodes retire` and `cordon` warn first when validate would then fail.

Real `fabric` processes, real git, the real planner.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.enrollment.registry import verify_nodes
from llm_fabric.plan.planning import plan_site
from llm_fabric.site.loader import SiteRepo, collect_site, load_site
from tests.fixtures.cli import fabric, git
from tests.fixtures.factsbundle import write_bundle

NODE = "hgx-h200-ceitec"  # declared in the reference site; qwen3.5-122b's replicas run on it


def site_as_is(root: Path) -> SiteRepo:
    """The repo, loaded even when validate would refuse it (the planner still runs and says what is short)."""
    site, _ = collect_site(root)
    assert site is not None
    return site


def test_cordon_moves_placement_off_the_node_and_uncordon_brings_it_back(site_repo: Path) -> None:
    assert any(r.node == NODE for r in plan_site(load_site(site_repo)).replicas)

    out = fabric("nodes", "cordon", NODE, "-C", str(site_repo))
    assert out.returncode == 0, out.stderr
    assert git(site_repo, "log", "-1", "--format=%s").strip() == f"cordon {NODE}"
    assert git(site_repo, "status", "--porcelain") == ""
    assert all(s.problem is None for s in verify_nodes(site_repo))
    assert site_as_is(site_repo).nodes[NODE].status == "cordoned"
    assert not any(r.node == NODE for r in plan_site(site_as_is(site_repo)).replicas)

    again = fabric("nodes", "cordon", NODE, "-C", str(site_repo))
    assert again.returncode == 0 and "none: already cordoned" in again.stdout

    back = fabric("nodes", "uncordon", NODE, "-C", str(site_repo))
    assert back.returncode == 0, back.stderr
    assert load_site(site_repo).nodes[NODE].status == "active"
    assert all(s.problem is None for s in verify_nodes(site_repo))
    assert any(r.node == NODE for r in plan_site(load_site(site_repo)).replicas)


def test_cordoning_the_only_node_of_a_kind_is_a_shortfall_not_a_problem(site_repo: Path) -> None:
    # dgx-b200-01 is the only b200 node: deepseek-v3-2 asks for b200 GPUs; while it is cordoned that is
    # a shortfall the plan reports (issue 28.5), so the cordon has nothing to warn of and validate passes
    out = fabric("nodes", "cordon", "dgx-b200-01", "-C", str(site_repo))
    assert out.returncode == 0, out.stderr
    assert "warning:" not in out.stdout and "dgx-b200-01: cordoned" in out.stdout
    validated = fabric("validate", "-C", str(site_repo))
    assert validated.returncode == 0, validated.stdout
    assert "no node in service may run `deepseek-v3-2` while `dgx-b200-01` is cordoned" in validated.stdout


def test_retire_warns_before_it_commits(site_repo: Path) -> None:
    out = fabric("nodes", "retire", "dgx-b300-01", "-C", str(site_repo), "--no-drain")
    assert out.returncode == 0, out.stderr
    assert out.stdout.index("warning: with `dgx-b300-01` retired") < out.stdout.index("dgx-b300-01: retired")
    assert "kimi-k2-6.yaml" in out.stdout and "; the change goes ahead, fix these next" in out.stdout


def test_the_retire_warning_waits_for_the_drain_that_then_fails(site_repo: Path) -> None:
    head = git(site_repo, "rev-parse", "HEAD")
    out = fabric("nodes", "retire", "dgx-b300-01", "-C", str(site_repo), "--kubectl", "false")
    assert out.returncode == 2, out.stdout
    assert "if the drain succeeds, the change goes ahead" in out.stdout
    assert git(site_repo, "rev-parse", "HEAD") == head and git(site_repo, "status", "--porcelain") == ""


def test_no_warning_when_the_site_stays_valid(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "spare.facts.json", "h100x8", uuid_salt="spare")
    enrolled = fabric(
        "enroll", "spare", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"
    )
    assert enrolled.returncode == 0, enrolled.stderr
    out = fabric("nodes", "cordon", "spare", "-C", str(site_repo))
    assert out.returncode == 0 and "warning:" not in out.stdout
    # re-enrolling refreshes the facts and keeps the cordon
    again = fabric(
        "enroll", "spare", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"
    )
    assert again.returncode == 0, again.stderr
    assert load_site(site_repo).nodes["spare"].status == "cordoned"


def test_a_retired_node_is_not_cordoned(site_repo: Path) -> None:
    assert fabric("nodes", "retire", NODE, "-C", str(site_repo), "--no-drain").returncode == 0
    out = fabric("nodes", "cordon", NODE, "-C", str(site_repo))
    assert out.returncode == 2
    assert "is retired" in out.stderr and "hint: re-enroll" in out.stderr
