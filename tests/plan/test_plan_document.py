"""The plan document through the real commands: what `fabric plan -o` writes, every reader accepts.

Chains the real producer to the real consumers (no hand-written plan files): `fabric render --plan`,
the serving stack's `planFile` through the Pulumi SDK (mocked engine), `fabric report --plan`; and a
document of another apiVersion, or the envelope older versions printed, is refused naming the version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from llm_fabric.cli.main import main
from llm_fabric.deploy.components import deploy_stack
from llm_fabric.ledger.store.period import Month
from llm_fabric.plan.document import load_plan
from tests.deploy.test_pulumi_stacks import RecordingMocks
from tests.fixtures.ledger_synthetic import generate_records


@pytest.fixture
def plan_file(site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "plan.json"
    assert main(["plan", "-C", str(site_repo), "-o", str(path)]) == 0
    assert f"plan written to {path}" in capsys.readouterr().out
    return path


def test_plan_json_prints_the_document_plan_o_writes(
    site_repo: Path, plan_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "-C", str(site_repo), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(plan_file.read_text())
    assert printed["apiVersion"] == written["apiVersion"] == "llm-fabric/v1"
    assert printed["kind"] == written["kind"] == "Plan"
    # the solver's wall time differs between two runs; the placement does not
    assert printed["replicas"] == written["replicas"] and printed["deployments"] == written["deployments"]


def test_render_reads_what_plan_wrote(site_repo: Path, plan_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    assert (
        main(["render", "--site", "brno", "-C", str(site_repo), "--plan", str(plan_file), "--out", str(out), "--check"])
        == 0
    )
    replicas = [r for r in load_plan(plan_file).replicas if r.site == "brno"]
    workloads = {p.name for p in (out / "brno" / "serving").glob("deployment-*.yaml")}
    # one Deployment per replica the plan puts at brno, beside the tenant gateway that brno runs
    # besides the engines: the tenant gateway and the canary prober
    assert workloads - {"deployment-fabric-gateway.yaml", "deployment-fabric-canary.yaml"} == {
        f"deployment-{r.deployment}-{r.index}.yaml" for r in replicas
    }
    assert replicas


def test_pulumi_plan_file_reads_what_plan_wrote(site_repo: Path, plan_file: Path) -> None:
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="llm-fabric-serving", stack="brno", preview=False)
    pulumi.runtime.set_all_config(
        {
            "llm-fabric-serving:siteRepo": str(site_repo),
            "llm-fabric-serving:planFile": str(plan_file),
            "llm-fabric-serving:site": "brno",
        }
    )

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        components = deploy_stack("serving", pulumi.Config())
        return pulumi.Output.all(*[r.id for c in components for r in c.resources])

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({})
    deployments = [
        name
        for typ, name, _ in mocks.resources
        if typ == "kubernetes:apps/v1:Deployment" and "fabric-gateway" not in name and "fabric-canary" not in name
    ]
    assert len(deployments) == len([r for r in load_plan(plan_file).replicas if r.site == "brno"])


def test_report_reads_what_plan_wrote(site_repo: Path, plan_file: Path, tmp_path: Path) -> None:
    records = tmp_path / "records.parquet"
    generate_records(records, Month.parse("2026-10"), 2_000, {"qwen3-5": (1100, 33958)}, ["muni-researchers"])
    out = tmp_path / "report"
    argv = ["report", "-C", str(site_repo), "--month", "2026-10", "--requests", str(records)]
    assert main([*argv, "--plan", str(plan_file), "--out", str(out)]) == 0
    assert (out / "manifest.json").is_file()


def test_plan_with_base_carries_its_diff_and_is_still_a_plan(site_repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    assert main(["plan", "-C", str(site_repo), "--base", "HEAD", "-o", str(path)]) == 0
    plan = load_plan(path)
    assert plan.diff is not None and plan.diff.base_revision == "HEAD" and plan.diff.empty
    assert (
        main(["render", "--site", "brno", "-C", str(site_repo), "--plan", str(path), "--out", str(tmp_path / "out")])
        == 0
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: {**d, "apiVersion": "llm-fabric/v2"}, "apiVersion `llm-fabric/v2` is not one this fabric reads"),
        (lambda d: {"plan": d, "diff": None, "complete": True}, "the envelope `fabric plan --json` printed before"),
        (lambda d: {k: v for k, v in d.items() if k != "apiVersion"}, "no `apiVersion`"),
        (lambda d: {**d, "kind": "Report"}, "kind `Report` is not `Plan`"),
        (lambda d: {**d, "replicas": [{**d["replicas"][0], "gpu_modle": "b200"}]}, "replicas.0.gpu_modle"),
        (
            lambda d: {**d, "replicas": [{k: v for k, v in r.items() if k != "checkpoint"} for r in d["replicas"]]},
            "written by an older fabric: replica deepseek-v3-2/0 has no `checkpoint`",
        ),
    ],
)
def test_foreign_documents_are_refused_with_the_reason(
    site_repo: Path, plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, expected: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edit(json.loads(plan_file.read_text()))))
    assert (
        main(["render", "--site", "brno", "-C", str(site_repo), "--plan", str(bad), "--out", str(tmp_path / "out")])
        == 2
    )
    err = capsys.readouterr().err
    assert str(bad) in err and expected in err and "Traceback" not in err


def test_the_positional_site_repo_still_works_with_a_note(
    site_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["validate", str(site_repo)]) == 0
    assert "deprecated" in capsys.readouterr().err
    monkeypatch.chdir(site_repo)
    assert main(["validate"]) == 0  # inside the site repo: no flag
    said = capsys.readouterr().out
    assert said.startswith(f"valid: {Path.cwd()} (") and "valid: ." not in said  # the folder named (issue 41.11)
    monkeypatch.setenv("FABRIC_SITE_REPO", str(site_repo))
    monkeypatch.chdir(site_repo.parent)
    assert main(["validate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["site_repo"] == str(site_repo)
