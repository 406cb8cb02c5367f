"""The policy gate of `fabric validate` on real site repos: exit 3, the rule, the objects and the fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.policies.gate import evaluate_policies
from llm_fabric.site.loader import load_site


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _validate(site: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    rc = main(["validate", str(site), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_reference_site_satisfies_every_policy(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, report = _validate(site_repo, capsys)
    assert rc == 0, report
    assert evaluate_policies(load_site(site_repo)) == []


def test_external_fallback_for_sensitive_is_refused(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = site_repo / "policies" / "sovereignty.yaml"
    _edit(
        policy,
        "    external_fallback: false\n    prompt_logging: false",
        "    external_fallback: true\n    prompt_logging: false",
    )
    rc, report = _validate(site_repo, capsys)
    assert rc == 3
    violations = report["violations"]
    assert isinstance(violations, list) and len(violations) == 1
    v = violations[0]
    assert "sovereignty.external-fallback" in v["message"] and "`sensitive`" in v["message"]
    expected_line = policy.read_text().splitlines().index("    external_fallback: true") + 1
    assert v["file"].endswith("policies/sovereignty.yaml") and v["line"] == expected_line
    assert v["hint"] == "set external_fallback: false for `sensitive`"


def test_sensitive_deployment_pinned_abroad_has_no_eligible_node(
    make_site_repo: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site_repo()
    # a second site, in Germany, run by a commercial operator; the H200 node moves there
    _edit(
        site / "fabric.yaml",
        "gateway:",
        "  frankfurt:\n    display_name: Colocation, Frankfurt\n"
        "    jurisdiction: {country: DE, eu: true}\n    operator: {name: ColoCorp, federation_member: false}\n"
        "    cluster: {name: fra}\ngateway:",
    )
    _edit(site / "nodes" / "hgx-h200-ceitec.yaml", "site: brno", "site: frankfurt")
    rc, report = _validate(site, capsys)
    assert rc == 3
    messages = [v["message"] for v in report["violations"]]  # type: ignore[union-attr]
    # qwen3-5-122b serves sensitive data and is dedicated to the H200's owner: nowhere to go
    blocked = [m for m in messages if "placement.no-eligible-node" in m and "qwen3-5-122b" in m]
    assert len(blocked) == 1
    assert "may be processed only in CZ; site `frankfurt` is in DE" in blocked[0]
    assert "only by federation members; site `frankfurt` is operated by ColoCorp" in blocked[0]
    # mistral-small-4 (public, internal; H200 only) may not go either: internal requires federation operators
    assert any("mistral-small-4" in m and "only by federation members" in m for m in messages)
    # gpt-oss-120b (public, internal) runs on H100 too: the partner centre in Vienna is a federation member
    assert not any("gpt-oss-120b" in m for m in messages)


def test_dedicated_replicas_beyond_contribution(site_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(site_repo / "tenants" / "ceitec-structural.yaml", "qwen3-5-122b: 1", "qwen3-5-122b: 3")
    rc, report = _validate(site_repo, capsys)
    assert rc == 3
    messages = " ".join(v["message"] for v in report["violations"])  # type: ignore[union-attr]
    assert "allocation.exceeds-contribution" in messages and "need at least 6 GPUs" in messages
    assert "allocation.exceeds-deployment" in messages


def test_limited_node_refuses_a_large_model(site_repo: Path) -> None:
    _edit(site_repo / "nodes" / "dgx-b200-01.yaml", "tier: full", "tier: limited")
    violations = evaluate_policies(load_site(site_repo))
    assert [v.rule for v in violations] == ["placement.no-eligible-node"]
    assert violations[0].objects[0] == "deployment/deepseek-v3-2"
    assert "limited-tier and takes only models marked small; `deepseek-v3.2` is not" in violations[0].message
