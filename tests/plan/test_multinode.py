"""Replicas larger than one node: DeepSeek V3 FP8 (674 GB) on two 8 x H100 machines (640 GB each).

Planned as one two-node replica only over a shared RDMA fabric (usable ports of one link layer in both
nodes' enrollment facts), same GPU model and driver branch; rendered as a LeaderWorkerSet checked against
the LWS CRD schema; refused with the reason otherwise; a node that leaves takes the whole group with it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from llm_fabric.kube import labels as L
from llm_fabric.kube.options import StackOptions
from llm_fabric.plan.document import Plan
from llm_fabric.plan.planning import plan_site
from llm_fabric.serving.workloads import build_serving, worker_script
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment, HostInventory, NodeManifest, RdmaPort, Target
from tests.deploy.crdschemas import validate_custom
from tests.plan.onesite import federation, node


def _node(
    name: str, *, rdma: str | None = "InfiniBand", driver: str = "580.82.07", status: str = "active"
) -> NodeManifest:
    ports = [
        RdmaPort(device=f"mlx5_{i}", port=1, link_layer=rdma, rate_gbps=400, state="ACTIVE", physical_state="LinkUp")
        for i in range(8)
        if rdma is not None
    ]
    return node(name, "h100-sxm", driver=driver, status=status, host=HostInventory(rdma=ports))


def _federation(nodes: list[NodeManifest], deployment: Deployment | None = None) -> SiteRepo:
    dep = deployment or Deployment(
        name="deepseek-v3", recipe="deepseek-v3", quantization="fp8", replicas=1, data_classes=["public"]
    )
    return federation(nodes, dep)


def _plan(site: SiteRepo) -> Plan:
    return plan_site(site, time_limit_s=2)


def test_two_h100_nodes_on_infiniband_hold_one_deepseek_replica() -> None:
    plan = _plan(_federation([_node("h100-a"), _node("h100-b")]))
    assert plan.complete, [s.reasons for s in plan.shortfalls]
    [replica] = plan.replicas
    assert (replica.node, replica.worker_nodes) == ("h100-a", ["h100-b"])
    assert (replica.parallelism, replica.tensor_parallel_size, replica.pipeline_parallel_size) == ("tp", 8, 2)
    assert replica.gpus == 16 and replica.gpu_indices == list(range(8))
    # a tensor-parallel group stays in a node; the pipeline crosses the fabric
    args = replica.engine_args
    assert args[args.index("--tensor-parallel-size") + 1] == "8" and "--headless" not in args
    assert args[args.index("--nnodes") + 1] == "2" and args[args.index("--node-rank") + 1] == "0"
    assert "--headless" in replica.worker_engine_args
    capacity = plan.deployments["deepseek-v3"]
    assert capacity.multi_node is not None and "h100-a+h100-b" in capacity.multi_node
    assert "InfiniBand" in capacity.multi_node and "400 Gb/s" in capacity.multi_node
    assert capacity.max_concurrency_p95 > 0 and capacity.expected is not None and capacity.ceiling is not None
    assert capacity.expected.output_tokens_per_s_total < capacity.ceiling.output_tokens_per_s_total
    assert plan.sites["brno"].gpus_used == 16


def test_the_two_node_replica_renders_as_a_leader_worker_set_that_passes_the_crd() -> None:
    site = _federation([_node("h100-a"), _node("h100-b")])
    plan = _plan(site)
    options = StackOptions(site_repo=Path("/nonexistent"))
    bundles = build_serving(site, plan, "brno", "llm-fabric", options)
    objects = [o for b in bundles for o in b.objects]
    [lws] = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    assert not [o for o in objects if o["kind"] == "Deployment"]
    validate_custom(lws)  # the LeaderWorkerSet CRD schema of LWS v0.10.0
    # Kueue admits the group as one workload: the queue label is on the set
    assert lws["metadata"]["labels"][L.QUEUE_NAME]
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2 and template["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader, worker = template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]

    def hosts(spec: dict) -> list[str]:  # type: ignore[type-arg]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        return list(terms[0]["matchExpressions"][0]["values"])

    assert hosts(leader) == ["h100-a"] and hosts(worker) == ["h100-b"]
    for spec in (leader, worker):  # every node of the group gives all its GPUs
        assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # only the leader serves: the Service (component=engine) does not select the workers
    assert template["workerTemplate"]["metadata"]["labels"]["app.kubernetes.io/component"] == "engine-worker"
    script = worker["containers"][0]["args"][0]
    assert "--node-rank ${LWS_WORKER_INDEX}" in script and "--master-addr ${LWS_LEADER_ADDRESS}" in script
    assert "--headless" in script and "readinessProbe" not in worker["containers"][0]
    # the leader is probed by generating and drains its streams; a headless worker has neither
    assert leader["containers"][0]["livenessProbe"]["exec"]["command"][3] == "live"
    assert "lifecycle" in leader["containers"][0] and "lifecycle" not in worker["containers"][0]


def test_the_worker_script_is_valid_shell_and_expands_the_rank() -> None:
    plan = _plan(_federation([_node("h100-a"), _node("h100-b")]))
    script = worker_script(plan.replicas[0], 8).replace("exec vllm serve", "printf '%s\\n'", 1)
    env = {"LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "deepseek-v3-0.llm-fabric", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out[out.index("--node-rank") + 1] == "1"
    assert out[out.index("--master-addr") + 1] == "deepseek-v3-0.llm-fabric"
    assert out[out.index("--override-generation-config") + 1].startswith("{")


def test_dp_ep_across_two_nodes_starts_each_worker_at_its_rank() -> None:
    dep = Deployment(
        name="deepseek-v3",
        recipe="deepseek-v3",
        quantization="fp8",
        replicas=1,
        data_classes=["public"],
        parallelism="dp-ep",
    )
    plan = _plan(_federation([_node("h100-a"), _node("h100-b")], dep))
    [replica] = plan.replicas
    assert (replica.parallelism, replica.data_parallel_size, replica.tensor_parallel_size) == ("dp-ep", 16, 1)
    args = replica.engine_args
    assert "--enable-expert-parallel" in args and args[args.index("--data-parallel-size-local") + 1] == "8"
    script = worker_script(replica, 8).replace("exec vllm serve", "printf '%s\\n'", 1)
    env = {"LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "leader", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out[out.index("--data-parallel-start-rank") + 1] == "8" and "--headless" in out


@pytest.mark.parametrize(
    ("nodes", "needle"),
    [
        ([_node("h100-a", rdma=None), _node("h100-b", rdma=None)], "no usable RDMA port"),
        ([_node("h100-a"), _node("h100-b", rdma="Ethernet")], "cannot hold one replica"),
        ([_node("h100-a"), _node("h100-b", driver="570.172.08")], "driver 570"),
        ([_node("h100-a")], "one node alone is no multi-node replica"),
    ],
    ids=["no-fabric", "infiniband-and-roce", "driver-branches", "one-node"],
)
def test_without_a_shared_fabric_it_is_refused_with_that_reason(nodes: list[NodeManifest], needle: str) -> None:
    plan = _plan(_federation(nodes))
    assert not plan.replicas and not plan.complete
    [short] = plan.shortfalls
    assert short.wanted == 1 and short.planned == 0
    assert short.reasons[0].startswith("multi-node not possible") and needle in short.reasons[0], short.reasons
    assert plan.deployments["deepseek-v3"].multi_node == short.reasons[0]


def test_a_node_leaving_takes_the_whole_group_and_the_plan_says_why() -> None:
    before = _plan(_federation([_node("h100-a"), _node("h100-b")]))
    after = plan_site(_federation([_node("h100-a"), _node("h100-b", status="cordoned")]), before, time_limit_s=2)
    assert len(before.replicas) == 1 and not after.replicas  # no half of a group stays
    # the cordon's cost first (issue 28.5: deployable meanwhile), then why nothing else holds the group
    assert after.shortfalls[0].reasons[0] == "`h100-b` is cordoned; back in service, the target is met"
    assert "one node alone" in after.shortfalls[0].reasons[1] and after.deployable


def test_a_session_target_places_as_many_groups_as_it_needs() -> None:
    dep = Deployment(
        name="deepseek-v3",
        recipe="deepseek-v3",
        quantization="fp8",
        data_classes=["public"],
        target=Target(concurrent_sessions=100, context_tokens=32768),
    )
    nodes = [_node(f"h100-{c}") for c in "abcdef"]
    plan = _plan(_federation(nodes, dep))
    groups = [r.nodes for r in plan.replicas]
    assert all(len(g) == 2 for g in groups) and len({n for g in groups for n in g}) == 2 * len(groups)
    capacity = plan.deployments["deepseek-v3"]
    assert capacity.max_concurrency_target is not None and capacity.max_concurrency_target >= 100
    assert plan.complete, [s.reasons for s in plan.shortfalls]
