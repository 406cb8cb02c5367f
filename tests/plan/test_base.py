"""`fabric plan --base REV` on a real git history: add a node, raise a target, change a policy."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.enrollment.registry import sign_file
from llm_fabric.site.gitrepo import commit_paths
from llm_fabric.trust.signatures import default_private_key_path, load_private_key


def _commit(site: Path, path: Path, text: str, message: str) -> None:
    path.write_text(text)
    assert commit_paths(site, [path], message) is not None


def _plan(site: Path, base: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    rc = main(["plan", str(site), "--base", base, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_base_diff_over_history(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = site_repo / "nodes"
    b200 = (nodes / "dgx-b200-01.yaml").read_text().replace("dgx-b200-01", "dgx-b200-02")
    for old in [line.split("- ")[1] for line in b200.splitlines() if line.strip().startswith("- GPU-")]:
        b200 = b200.replace(old, f"GPU-{uuid.uuid4()}")
    # the new node is signed with the federation key: plan refuses an unsigned one
    (nodes / "dgx-b200-02.yaml").write_text(b200)
    sign_file(nodes / "dgx-b200-02.yaml", load_private_key(default_private_key_path(site_repo)))
    assert commit_paths(site_repo, [nodes / "dgx-b200-02.yaml"], "enroll dgx-b200-02") is not None
    dep = site_repo / "deployments" / "deepseek-v3-2.yaml"
    _commit(site_repo, dep, dep.read_text().replace("replicas: 1", "replicas: 2"), "deepseek: 2 replicas")
    pol = site_repo / "policies" / "sovereignty.yaml"
    _commit(
        site_repo,
        pol,
        pol.read_text().replace("external_fallback: false", "external_fallback: true", 1),
        "allow external fallback for sensitive",
    )

    rc, out = _plan(site_repo, "HEAD~3", capsys)
    assert rc == 3  # the policy change is refused
    diff = out["diff"]
    assert isinstance(diff, dict)
    assert diff["replicas"] == [
        {
            "deployment": "deepseek-v3-2",
            "index": 1,
            "change": "added",
            "before": None,
            "after": "dgx-b200-02 GPUs 0,1,2,3,4,5,6,7 (8xb200)",
        }
    ]
    cap = {c["deployment"]: c for c in diff["capacity"]}
    assert list(cap) == ["deepseek-v3-2"]
    assert cap["deepseek-v3-2"]["concurrency_p50_after"] == 2 * cap["deepseek-v3-2"]["concurrency_p50_before"]
    assert [v["rule"] for v in diff["new_violations"]] == ["sovereignty.external-fallback"]

    # the policy commit alone changes no placement
    rc, out = _plan(site_repo, "HEAD~1", capsys)
    assert rc == 3
    assert out["diff"]["replicas"] == [] and out["diff"]["capacity"] == []  # type: ignore[index]

    # reverting the policy: the review of the node + target change is clean
    _commit(site_repo, pol, pol.read_text().replace("external_fallback: true", "external_fallback: false", 1), "revert")
    rc, out = _plan(site_repo, "HEAD~1", capsys)
    assert rc == 0
    assert [v["rule"] for v in out["diff"]["resolved_violations"]] == ["sovereignty.external-fallback"]  # type: ignore[index]


def test_raised_target_beyond_capacity_is_a_shortfall_in_words(
    site_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dep = site_repo / "deployments" / "kimi-k2-6.yaml"
    _commit(site_repo, dep, dep.read_text().replace("replicas: 1", "replicas: 3"), "kimi: 3 replicas")
    capsys.readouterr()
    assert main(["plan", str(site_repo), "--base", "HEAD~1", "--format", "markdown"]) == 3
    md, err = capsys.readouterr()
    # the comment goes to stdout whole; the refusal is said once, on stderr
    assert err.endswith("\nerror: the plan for `cerit-sc` is incomplete (1 problem, listed above)\n")
    assert "(INCOMPLETE)" in md
    assert "| new | placement.shortfall | kimi-k2-6: 1 of 3 replicas |" in md
    assert "each replica needs 4 GPUs inside one node" in md
    assert "dgx-b300-01 (8 GPUs): 8 in use by kimi-k2-6 4, glm-5-1 2, qwen3-5 2" in md
