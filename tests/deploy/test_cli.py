"""`fabric render` and `fabric provision` at the CLI edge: exit codes and what they print."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from llm_fabric.cli.main import main


def test_render_cli_writes_the_stacks(site_repo: Path, tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.json"
    from tests.deploy.planfixture import seed_plan

    plan.write_text(seed_plan().model_dump_json())
    code = main(
        ["render", "--site", "brno", str(site_repo), "--out", str(tmp_path / "out"), "--plan", str(plan), "--json"]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert (
        report["site"] == "brno" and report["objects"]["serving"] == 58
    )  # 24 + the gateway's 8 (its records claim and relay peers included) + tuwien-ai's LocalQueue + the canary's 12
    # + a PodDisruptionBudget per deployment (7) + the ingress NetworkPolicies of the engines and the prober (2)
    doc = yaml.safe_load((tmp_path / "out/brno/serving/deployment-glm-5-1-0.yaml").read_text())
    assert doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_render_cli_reports_a_broken_plan_file(site_repo: Path, tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"federation": "cerit-sc"}')
    assert main(["render", "--site", "brno", str(site_repo), "--out", str(tmp_path / "out"), "--plan", str(plan)]) == 2
    assert "is not a plan" in capsys.readouterr().err


def test_render_cli_unknown_site(site_repo: Path, tmp_path: Path, capsys) -> None:
    assert main(["render", str(site_repo), "--out", str(tmp_path), "--site", "brnoo"]) == 2
    assert "did you mean `brno`" in capsys.readouterr().err
    # the reference federation has two sites: render must be told which cluster it writes for
    assert main(["render", str(site_repo), "--out", str(tmp_path / "none")]) == 2
    assert "the site repo has 2 sites (brno, vienna)" in capsys.readouterr().err


def test_provision_cli_unknown_node(site_repo: Path, capsys) -> None:
    assert main(["provision", "hgx-h200-ceitek", "--site-repo", str(site_repo)]) == 2
    assert "did you mean `hgx-h200-ceitec`" in capsys.readouterr().err
