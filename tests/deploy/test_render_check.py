"""`fabric render --check [--crds DIR]`: every written manifest validated; invalid ones named by file, line, field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as kv

from llm_fabric.cli.main import main
from llm_fabric.deploy.build import StackInputs
from llm_fabric.deploy.crd_validation import CrdSchemas, check_manifests, core_errors
from llm_fabric.deploy.render import dump_yaml, render_stacks
from llm_fabric.errors import PolicyRefusal, UsageError
from tests.deploy.crdschemas import crds_or_skip
from tests.deploy.planfixture import seed_plan

KUEUE_CQ = "kueue/kueue.x-k8s.io_clusterqueues.yaml"


def _texts(paths: list[Path]) -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for path in paths]


def _plan(tmp_path: Path) -> Path:
    plan = tmp_path / "plan.json"
    plan.write_text(seed_plan().model_dump_json())
    return plan


def _edited_crds(tmp_path: Path, edit: Any) -> Path:
    """A copy of the shared CRD folder with the ClusterQueue CRD changed by `edit(crd)`."""
    shared = crds_or_skip()
    out = tmp_path / "crds"
    for path in shared.rglob("*.yaml"):
        target = out / path.relative_to(shared)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    crd = yaml.safe_load((out / KUEUE_CQ).read_text())
    edit(crd)
    (out / KUEUE_CQ).write_text(yaml.safe_dump(crd))
    return out


def test_cli_check_passes_the_reference_site(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crds = crds_or_skip()
    out = tmp_path / "out"
    args = ["render", "--site", "brno", str(site_repo), "--out", str(out), "--plan", str(_plan(tmp_path)), "--check"]
    assert main([*args, "--crds", str(crds), "--json"]) == 0
    check = json.loads(capsys.readouterr().out)["check"]
    # the tenant gateway: ConfigMap, Deployment, Service, NetworkPolicy, records claim, PodMonitor, rules,
    # dcgm-exporter (collectors ConfigMap, DaemonSet, Service, ServiceMonitor), four dashboard ConfigMaps
    # in place of the one dashboard before; the canary prober (ConfigMap, Deployment, Service, a direct
    # Service per replica: 7; PodMonitor, rules); the gateway's Redis (StatefulSet, Service, two NetworkPolicies);
    # a PodDisruptionBudget per deployment: 7; the gateway's relay peers ConfigMap (issue 39 F1); the ingress
    # NetworkPolicies of the engines and of the prober (issue 39 F6, F8)
    assert check == {"kubernetes_version": "1.33", "core": 54, "custom": 23, "custom_unchecked": 0, "crds": str(crds)}
    assert main(args) == 0  # without --crds: custom resources are counted, not checked
    assert "23 custom resources not checked (no --crds DIR)" in capsys.readouterr().out


def test_cli_check_names_the_file_line_and_field(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster whose Kueue predates `cohortName`: the rendered ClusterQueues are refused, exit 3."""

    def drop_cohort_name(crd: dict[str, Any]) -> None:
        for version in crd["spec"]["versions"]:
            version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop("cohortName", None)

    crds = _edited_crds(tmp_path, drop_cohort_name)
    out = tmp_path / "out"
    code = main(
        [
            "render",
            "--site",
            "brno",
            str(site_repo),
            "--out",
            str(out),
            "--plan",
            str(_plan(tmp_path)),
            "--check",
            "--crds",
            str(crds),
        ]
    )
    err = capsys.readouterr().err
    assert code == 3, err
    assert not out.exists()  # validated before anything is written: nothing to apply, nothing half-updated
    queue = out / "brno" / "allocations" / "clusterqueue-cerit-sc.yaml"
    assert main(["render", "--site", "brno", str(site_repo), "--out", str(out), "--plan", str(_plan(tmp_path))]) == 0
    line = next(i for i, text in enumerate(queue.read_text().splitlines(), 1) if text.startswith("spec:"))
    assert f"{queue}:{line}: spec: invalid kueue.x-k8s.io/v1beta2 ClusterQueue (CRD schema)" in err
    assert "'cohortName' was unexpected" in err and "Traceback" not in err


def test_a_refused_check_leaves_the_previous_render_as_it_was(tmp_path: Path, reference_inputs: StackInputs) -> None:
    """A re-render whose check fails neither writes its new files nor removes the stale ones."""
    out = tmp_path / "out"
    render_stacks(reference_inputs, out)
    stale = out / reference_inputs.site_id / "serving" / "configmap-retired.yaml"
    stale.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: retired}\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def refuse(manifests: list[tuple[Path, str]]) -> None:
        assert len(manifests) > 30 and all(text.startswith("apiVersion:") for _, text in manifests)
        raise PolicyRefusal("refused for the test")

    (out / reference_inputs.site_id / "serving" / "kustomization.yaml").write_text("resources: []\n")
    before[out / reference_inputs.site_id / "serving" / "kustomization.yaml"] = b"resources: []\n"
    with pytest.raises(PolicyRefusal):
        render_stacks(reference_inputs, out, check=refuse)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_resource_without_its_crd_is_refused(tmp_path: Path, reference_inputs: StackInputs) -> None:
    """Kueue CRDs that only serve v1beta1 (an old Kueue): the v1beta2 objects have no CRD to go to."""

    def only_v1beta1(crd: dict[str, Any]) -> None:
        crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]

    crds = CrdSchemas.load(_edited_crds(tmp_path, only_v1beta1))
    result = render_stacks(reference_inputs, tmp_path / "out", stacks=("allocations",))
    with pytest.raises(PolicyRefusal) as exc:
        check_manifests(_texts(result.manifests), "1.33", crds)
    problems = exc.value.problems
    queues = sorted(p for p in result.manifests if p.name.startswith("clusterqueue-"))
    assert (
        sorted(p.file for p in problems if p.file is not None) == queues and len(queues) == 6
    )  # one per tenant, and the pool
    for problem in problems:
        assert problem.field == "apiVersion" and "no CRD for kueue.x-k8s.io/v1beta2 ClusterQueue" in problem.message


def test_a_misspelt_core_field_is_found_like_kubernetes_validate_finds_it(
    tmp_path: Path, reference_inputs: StackInputs
) -> None:
    result = render_stacks(reference_inputs, tmp_path, stacks=("serving",))
    path = next(p for p in result.manifests if p.name.startswith("deployment-"))
    workload = yaml.safe_load(path.read_text())
    workload["spec"]["template"]["spec"]["containers"][0]["startupProbes"] = {}
    path.write_text(dump_yaml(workload))
    with pytest.raises(kv.ValidationError) as oracle:
        kv.validate(workload, "1.33", strict=True)
    with pytest.raises(PolicyRefusal) as exc:
        check_manifests(_texts(result.manifests), "1.33", None)
    [problem] = exc.value.problems
    assert problem.file == path and problem.field == ".".join(str(s) for s in oracle.value.absolute_path)
    assert problem.field == "spec.template.spec.containers.0" and "'startupProbes' was unexpected" in problem.message
    assert problem.line is not None and "containers:" in path.read_text().splitlines()[problem.line - 2]


def test_a_kind_missing_from_the_cluster_version_and_unknown_versions() -> None:
    budget = {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"}, "spec": {}}
    assert core_errors(budget, "1.33") is None  # removed in 1.25
    assert core_errors({**budget, "apiVersion": "policy/v1"}, "1.33") == []
    with pytest.raises(UsageError, match=r"no schemas for Kubernetes 1\.99"):
        core_errors(budget, "1.99")


def test_crds_folder_errors(site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        CrdSchemas.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "not-a-crd.yaml").write_text("kind: ConfigMap\n")
    with pytest.raises(UsageError, match="no CustomResourceDefinition"):
        CrdSchemas.load(tmp_path / "empty")
    assert (
        main(["render", "--site", "brno", str(site_repo), "--out", str(tmp_path / "o"), "--crds", str(tmp_path)]) == 2
    )
    assert "--crds is used by --check" in capsys.readouterr().err
