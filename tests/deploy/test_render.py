"""`fabric render` output: one file per resource, kustomizations, and every manifest valid for its cluster."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml
from kubernetes_validate import utils as kv

from llm_fabric.deploy.build import STACK_ORDER, StackInputs, build_stack
from llm_fabric.deploy.crd_validation import is_core
from llm_fabric.deploy.render import render_stacks
from llm_fabric.kube.manifests import all_objects
from tests.deploy.crdschemas import crds_or_skip, known, validate_custom

K8S_VERSION = "1.33.0"  # the reference site's cluster.kubernetes_version


def _documents(folder: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.rglob("*.yaml")) if p.name != "kustomization.yaml"]


def test_render_writes_one_file_per_object_and_kustomizations(reference_inputs: StackInputs, tmp_path: Path) -> None:
    result = render_stacks(reference_inputs, tmp_path)
    site = tmp_path / "brno"
    assert yaml.safe_load((site / "kustomization.yaml").read_text())["resources"] == list(STACK_ORDER)
    for stack in STACK_ORDER:
        expected = all_objects(build_stack(stack, reference_inputs))
        listed = yaml.safe_load((site / stack / "kustomization.yaml").read_text())["resources"]
        assert len(listed) == len(expected) == result.objects[stack]
        assert [yaml.safe_load((site / stack / name).read_text()) for name in listed] == expected


def test_every_core_manifest_passes_strict_kubernetes_validation(reference_inputs: StackInputs, tmp_path: Path) -> None:
    render_stacks(reference_inputs, tmp_path)
    core = [d for d in _documents(tmp_path) if is_core(d)]
    assert {d["kind"] for d in core} >= {"Namespace", "Deployment", "Service", "NetworkPolicy", "PriorityClass"}
    for doc in core:
        kv.validate(doc, K8S_VERSION, strict=True)


def test_strict_validation_catches_a_misspelt_field(reference_inputs: StackInputs) -> None:
    workload = next(o for o in all_objects(build_stack("serving", reference_inputs)) if o["kind"] == "Deployment")
    workload["spec"]["template"]["spec"]["containers"][0]["startupProbes"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(workload, K8S_VERSION, strict=True)


def test_every_custom_resource_passes_its_crd_schema(reference_inputs: StackInputs, tmp_path: Path) -> None:
    crds_or_skip()
    render_stacks(reference_inputs, tmp_path)
    custom = [d for d in _documents(tmp_path) if not is_core(d)]
    kinds = {d["kind"] for d in custom}
    assert kinds == {
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "PrometheusRule",
        "PodMonitor",
        "ServiceMonitor",
    }
    for doc in custom:
        assert known(doc), f"no CRD for {doc['apiVersion']} {doc['kind']}"
        validate_custom(doc)


def test_crd_validation_catches_a_wrong_field(reference_inputs: StackInputs) -> None:
    crds_or_skip()
    queue = next(o for o in all_objects(build_stack("allocations", reference_inputs)) if o["kind"] == "ClusterQueue")
    queue["spec"]["cohort"] = queue["spec"].pop("cohortName")  # the v1beta1 spelling
    with pytest.raises(jsonschema.ValidationError):
        validate_custom(queue)


def test_operator_stacks_point_at_the_site_repo_and_validate(reference_inputs: StackInputs, tmp_path: Path) -> None:
    crds_or_skip()
    site_root = reference_inputs.site.root  # a site repo of its own (`fabric init`): the output goes inside it
    render_stacks(reference_inputs, site_root / "deploy", operator_repo="https://git.example/cerit/site.git")
    operator = site_root / "deploy" / "brno" / "operator"
    stacks = [yaml.safe_load(p.read_text()) for p in sorted(operator.glob("stack-*.yaml"))]
    assert [s["metadata"]["name"] for s in stacks] == [
        "llm-fabric-allocations-brno",
        "llm-fabric-observability-brno",
        "llm-fabric-serving-brno",
    ]
    for stack in stacks:
        validate_custom(stack)
        repo_dir = site_root / stack["spec"]["repoDir"]
        assert (repo_dir / "Pulumi.yaml").is_file() and (repo_dir / "__main__.py").is_file()
        # siteRepo is relative to the project folder and must lead back to the repo root
        assert (repo_dir / stack["spec"]["config"]["siteRepo"]).resolve() == site_root.resolve()
    serving = next(s for s in stacks if "serving" in s["metadata"]["name"])
    assert serving["spec"]["prerequisites"] == [{"name": "llm-fabric-allocations-brno"}]


def test_rerender_is_quiet_and_prunes_what_is_gone(reference_inputs: StackInputs, tmp_path: Path) -> None:
    render_stacks(reference_inputs, tmp_path)
    serving = tmp_path / "brno" / "serving"
    mtimes = {p: p.stat().st_mtime_ns for p in serving.glob("*.yaml")}
    plan = reference_inputs.the_plan()
    reference_inputs.plan = plan.model_copy(
        update={"replicas": [r for r in plan.replicas if r.deployment != "glm-5-1"]}
    )
    result = render_stacks(reference_inputs, tmp_path)
    assert [p.name for p in result.removed] == [
        "deployment-glm-5-1-0.yaml",
        "poddisruptionbudget-glm-5-1.yaml",
        "service-glm-5-1-0-direct.yaml",
        "service-glm-5-1.yaml",
    ]
    # the canary prober holds the plan (its ConfigMap, and the Deployment restarts on it): those change
    carry_plan = {"kustomization.yaml", "configmap-fabric-canary.yaml", "deployment-fabric-canary.yaml"}
    unchanged = [p for p in serving.glob("*.yaml") if p.name not in carry_plan]
    assert unchanged and all(p.stat().st_mtime_ns == mtimes[p] for p in unchanged)
