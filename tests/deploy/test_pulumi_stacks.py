"""Each stack through the real Pulumi SDK (mocked engine, preview=False): the resources it registers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest

from llm_fabric.deploy.build import StackInputs, build_stack, load_inputs
from llm_fabric.deploy.components import deploy_stack
from llm_fabric.init import init_site
from llm_fabric.kube.manifests import all_objects
from llm_fabric.kube.options import StackOptions
from llm_fabric.plan.planning import plan_site
from llm_fabric.serving.probes import canary_egress
from llm_fabric.serving.workloads import FINGERPRINT_ANNOTATION
from llm_fabric.trust.sites import load_trusted_site


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[tuple[str, str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append((args.typ, args.name, args.inputs))
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


def _plain(value: Any) -> Any:
    """Inputs come back through protobuf: every number is a float."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def run_stack(stack: str, inputs: StackInputs) -> RecordingMocks:
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project=f"llm-fabric-{stack}", stack="brno", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        components = deploy_stack(stack, inputs=inputs)
        return pulumi.Output.all(*[r.id for c in components for r in c.resources])

    program()
    return mocks


def kubernetes(mocks: RecordingMocks) -> dict[str, dict[str, Any]]:
    return {
        f"{inputs['kind']}/{inputs['metadata']['name']}": _plain(inputs)
        for typ, _, inputs in mocks.resources
        if typ.startswith("kubernetes:")
    }


@pytest.mark.parametrize("stack", ["allocations", "serving", "observability"])
def test_stack_registers_exactly_the_rendered_manifests(stack: str, reference_inputs: StackInputs) -> None:
    mocks = run_stack(stack, reference_inputs)
    rendered = {f"{o['kind']}/{o['metadata']['name']}": o for o in all_objects(build_stack(stack, reference_inputs))}
    assert kubernetes(mocks) == rendered


def test_serving_components_one_per_concept(reference_inputs: StackInputs) -> None:
    mocks = run_stack("serving", reference_inputs)
    components = sorted((typ, name) for typ, name, _ in mocks.resources if typ.startswith("llm-fabric:"))
    models = [name for typ, name in components if typ == "llm-fabric:serving:ServedModel"]
    assert models == sorted(reference_inputs.site.deployments)
    assert ("llm-fabric:serving:NetworkPolicy", "serving") in components
    assert ("llm-fabric:serving:Namespace", "llm-fabric") in components


def test_serving_replicas_get_gpus_node_args_and_queue(reference_inputs: StackInputs) -> None:
    resources = kubernetes(run_stack("serving", reference_inputs))
    plan = reference_inputs.the_plan()
    for replica in plan.replicas:
        workload = resources[f"Deployment/{replica.deployment}-{replica.index}"]
        pod = workload["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": str(replica.tensor_parallel_size)}
        term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term == [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [replica.node]}]}
        ]
        assert container["args"][: len(replica.engine_args)] == replica.engine_args
        assert container["args"][-2:] == ["--port", "8000"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env.items() >= replica.engine_env.items() and env["HF_HUB_OFFLINE"] == "1"
        labels = workload["spec"]["template"]["metadata"]["labels"]
        expected_queue = replica.dedicated_for or "cerit-sc-pool"
        assert labels["kueue.x-k8s.io/queue-name"] == expected_queue
        assert labels["fabric.llm/owner"] == replica.owner and labels["fabric.llm/site"] == "brno"
        assert pod["priorityClassName"] == ("llm-fabric-dedicated" if replica.dedicated_for else "llm-fabric-pool")
    # the queues the workloads name exist in the same stack
    assert {"LocalQueue/ceitec-structural", "LocalQueue/cerit-sc-pool"} <= resources.keys()


def test_cold_start_probe_allows_minutes(reference_inputs: StackInputs) -> None:
    resources = kubernetes(run_stack("serving", reference_inputs))
    probe = resources["Deployment/deepseek-v3-2-0"]["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    budget = probe["periodSeconds"] * probe["failureThreshold"]
    # 8 x B200 hold ~1.47 TB: 600 s base + 1 s per GB streamed from local disk
    assert 2000 < budget < 2200
    assert probe["httpGet"] == {"path": "/health", "port": "http"}


def test_generating_probes_and_the_drain_reach_the_stack(reference_inputs: StackInputs) -> None:
    resources = kubernetes(run_stack("serving", reference_inputs))
    pod = resources["Deployment/deepseek-v3-2-0"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    live = container["livenessProbe"]["exec"]["command"]
    assert live[:4] == ["python3", "-m", "llm_fabric.engine.runtime.probe", "live"]
    deadline = int(live[live.index("--deadline") + 1])
    assert container["livenessProbe"]["timeoutSeconds"] == deadline + 5
    assert container["readinessProbe"]["exec"]["command"][3] == "ready"
    assert container["lifecycle"]["preStop"]["exec"]["command"][3] == "drain"
    assert pod["terminationGracePeriodSeconds"] == 120


def test_network_policy_allows_dns_and_only_the_sites_cidrs(reference_inputs: StackInputs, edited_site: Any) -> None:
    policy = kubernetes(run_stack("serving", reference_inputs))["NetworkPolicy/llm-fabric-serving-egress"]
    assert policy["spec"]["policyTypes"] == ["Egress"]
    assert {p["port"] for p in policy["spec"]["egress"][0]["ports"]} == {53}
    # brno allows the Vienna site's ingress (Brno's gateway relays to Vienna's gateway there)
    # and the readiness probe reads the canary prober's verdict in the namespace
    assert policy["spec"]["egress"][1:] == [{"to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]}, canary_egress()]
    fabric = (reference_inputs.site.root / "fabric.yaml").read_text()
    closed = edited_site({"fabric.yaml": fabric.replace("- 192.0.2.0/24", "[]")})
    policy = kubernetes(run_stack("serving", closed))["NetworkPolicy/llm-fabric-serving-egress"]
    assert policy["spec"]["egress"][1:] == [canary_egress()]  # DNS and the canary prober only


def test_kueue_quotas_match_the_allocations(reference_inputs: StackInputs) -> None:
    resources = kubernetes(run_stack("allocations", reference_inputs))
    flavors = {k.split("/")[1]: v["spec"]["nodeLabels"] for k, v in resources.items() if k.startswith("ResourceFlavor")}
    assert flavors == {
        "b200-cerit-sc": {"fabric.llm/gpu-model": "b200", "fabric.llm/owner": "cerit-sc"},
        "b300-cerit-sc": {"fabric.llm/gpu-model": "b300", "fabric.llm/owner": "cerit-sc"},
        "h200-ceitec-structural": {"fabric.llm/gpu-model": "h200", "fabric.llm/owner": "ceitec-structural"},
    }

    def quota(kind_name: str) -> dict[str, dict[str, Any]]:
        groups = resources[kind_name]["spec"]["resourceGroups"]
        return {f["name"]: f["resources"][0] for g in groups for f in g["flavors"]}

    # CEITEC contributed 4 x H200 and keeps 2 dedicated (its tenant file), lending them when idle
    assert quota("ClusterQueue/ceitec-structural")["h200-ceitec-structural"] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 2,
        "lendingLimit": 2,
    }
    assert all(q["nominalQuota"] == 0 for q in quota("ClusterQueue/muni-researchers").values())
    pooled = {name: q["nominalQuota"] for name, q in quota("Cohort/cerit-sc").items()}
    assert pooled == {"b200-cerit-sc": 8, "b300-cerit-sc": 8, "h200-ceitec-structural": 2}
    queues = [v for k, v in resources.items() if k.startswith("ClusterQueue/")]
    assert {q["spec"]["cohortName"] for q in queues} == {"cerit-sc"}
    assert len(queues) == len(reference_inputs.site.tenants) + 1


def test_policy_without_lending_or_borrowing_sets_zero_limits(edited_site: Any) -> None:
    policy = "version: 1\nallocation:\n  lending: false\n  borrowing: false\n  reclaim_order: [lent, borrowed, pool]\n"
    inputs = edited_site({"policies/allocation.yaml": policy})
    queue = kubernetes(run_stack("allocations", inputs))["ClusterQueue/ceitec-structural"]
    limits = queue["spec"]["resourceGroups"][0]["flavors"][2]["resources"][0]
    assert limits == {"name": "nvidia.com/gpu", "nominalQuota": 2, "lendingLimit": 0, "borrowingLimit": 0}


def test_serving_stack_annotates_each_replica_with_the_planned_fingerprint(tmp_path: Path) -> None:
    root = init_site(tmp_path / "site", "cerit-sc").root
    site = load_trusted_site(root)
    plan = plan_site(site)  # the planner's own plan: every replica carries its fingerprint
    inputs = load_inputs(StackOptions(site_repo=root, site="brno"), site=site, plan=plan)
    resources = kubernetes(run_stack("serving", inputs))
    brno = [r for r in plan.replicas if r.site == "brno"]
    assert brno
    for replica in brno:
        workload = resources[f"Deployment/{replica.deployment}-{replica.index}"]
        expected = replica.config_fingerprint.sha256  # type: ignore[union-attr]
        assert workload["metadata"]["annotations"][FINGERPRINT_ANNOTATION] == expected
        assert workload["spec"]["template"]["metadata"]["annotations"][FINGERPRINT_ANNOTATION] == expected
