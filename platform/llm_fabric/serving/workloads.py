"""The serving fleet: per planned replica an engine workload (vLLM or SGLang) pinned to its node, per
deployment a Service.

Also the namespace, the PriorityClasses (dedicated replicas reclaim; pool replicas never preempt),
a NetworkPolicy that keeps the data in (serving pods reach DNS and the site's allowed CIDRs, nothing
else), one that keeps everyone else out (only the site's gateway, the canary prober, the site's
Prometheus and a multi-node replica's own workers reach an engine: an engine has no key, so a pod that
reached it would pass by the gateway's keys, limits, budgets and meter), and a PodMonitor whose
relabelling gives every engine series the plan's labels.

Both engines serve the OpenAI API, `/health` and (SGLang with `--enable-metrics`, which its commands
always carry) `/metrics` on the one port the plan gives them, so Service, probes and PodMonitor are
the same; a pod's `app.kubernetes.io/name` says which engine it runs. The probes (a generating
liveness probe, readiness with draining and the canary's verdict, the preStop drain) are
`serving.probes`'.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, replace
from typing import Any

from llm_fabric.engine.backends import backend
from llm_fabric.engine.capacity.cold_start import startup_budget_s
from llm_fabric.engine.command import ENGINE_PORT
from llm_fabric.errors import ConfigError, Problem
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest, network_policy, prometheus_peer
from llm_fabric.kube.options import StackOptions
from llm_fabric.names import CANARY_PROBER_LABELS, MODELS_DIR
from llm_fabric.plan.document import DeploymentCapacity, Plan, ReplicaPlacement, SurgeReplica
from llm_fabric.quota.allocations import pool_queue_name
from llm_fabric.serving import probes, weights
from llm_fabric.serving.disruption import disruption_budget
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.sites import TrustedSite

PRIORITY_DEDICATED = "llm-fabric-dedicated"
PRIORITY_POOL = "llm-fabric-pool"
# what selects engine pods of either engine (Service, NetworkPolicy, PodMonitor)
ENGINE_LABELS = {"app.kubernetes.io/part-of": L.PART_OF, "app.kubernetes.io/component": "engine"}
# a multi-node replica's headless workers (LeaderWorkerSet): they serve neither requests nor metrics
ENGINE_WORKER_LABELS = {"app.kubernetes.io/part-of": L.PART_OF, "app.kubernetes.io/component": "engine-worker"}
PROBE_PERIOD = 10
# the replica's configuration fingerprint (engine.fingerprint, the plan's sha256): which replicas answer alike
FINGERPRINT_ANNOTATION = "llm-fabric.io/config-fingerprint"
# on a surge replica's pods (label and annotation): the replica it stands in for while that one restarts
SURGE_FOR = "llm-fabric.io/surge-for"


def build_serving(site: TrustedSite, plan: Plan, site_id: str, namespace: str, options: StackOptions) -> list[Bundle]:
    replicas = sorted((r for r in plan.replicas if r.site == site_id), key=lambda r: (r.deployment, r.index))
    surges = site_surges(plan, site_id)
    _check_nodes(site, replicas + [s.placement for s in surges])
    bundles = [
        Bundle("namespace", namespace, [_namespace(namespace)]),
        Bundle("priority-classes", "llm-fabric", _priority_classes()),
        Bundle(
            "network-policy",
            "serving",
            [_network_policy(site, site_id, namespace), _ingress_policy(site, site_id, namespace)],
        ),
        Bundle("pod-monitor", "serving", [_pod_monitor(namespace)]),
    ]
    pinned = {(r.deployment, r.index): weights.pinned_weights(site, r) for r in replicas}
    surge_pinned = {(s.placement.deployment, s.replaces): weights.pinned_weights(site, s.placement) for s in surges}
    locked = [p for p in [*pinned.values(), *surge_pinned.values()] if p is not None]
    if locked:
        bundles.append(Bundle("weights-lock", "serving", [weights.lock_configmap(namespace, locked)]))
    by_deployment: dict[str, list[ReplicaPlacement]] = {}
    for replica in replicas:
        by_deployment.setdefault(replica.deployment, []).append(replica)
    pool = pool_queue_name(site)
    for name, placed in sorted(by_deployment.items()):
        objects = [_service(name, namespace)]
        if name in site.deployments:
            objects.append(disruption_budget(site.deployments[name], namespace, ENGINE_LABELS))
        capacity = plan.deployments.get(name)
        rendered: list[tuple[ReplicaPlacement, weights.PinnedWeights | None, SurgeReplica | None]] = [
            (r, pinned[(r.deployment, r.index)], None) for r in placed
        ]
        rendered += [
            (s.placement, surge_pinned[(name, s.replaces)], s) for s in surges if s.placement.deployment == name
        ]
        for replica, locked_weights, surge in rendered:
            render = ReplicaRender(
                replica, site.nodes[replica.node], namespace, options, pool, capacity, locked_weights
            )
            objects.append(_workload(render) if surge is None else _surge_workload(surge, render))
        bundles.append(Bundle("served-model", name, objects))
    return bundles


@dataclass(frozen=True)
class ReplicaRender:
    """What one replica's workload is rendered from: the replica, its node, where and how it is rendered, its
    deployment's planned capacity (the probes' timing), its pinned weights, and for a surge its identity."""

    replica: ReplicaPlacement
    node: NodeManifest
    namespace: str
    options: StackOptions
    pool: str  # the pool's queue: a replica not dedicated to an owner queues there
    capacity: DeploymentCapacity | None
    pinned: weights.PinnedWeights | None
    surge: tuple[str, str] | None = None  # a surge's name and the replica it stands in for

    @property
    def queue(self) -> str:
        return self.replica.dedicated_for or self.pool


def site_surges(plan: Plan, site_id: str) -> list[SurgeReplica]:
    """The rollout's surge replicas placed at `site_id`, in deployment and index order."""
    if plan.rollout is None:
        return []
    found = [s for d in plan.rollout.deployments for s in d.surges if s.placement.site == site_id]
    return sorted(found, key=lambda s: (s.placement.deployment, s.replaces))


def surge_name(deployment: str, replaces: int) -> str:
    return L.dns_name(deployment, "surge", str(replaces))


def _check_nodes(site: TrustedSite, replicas: list[ReplicaPlacement]) -> None:
    problems = [
        Problem(
            f"replica {r.deployment}/{r.index} is placed on node `{r.node}`, which the site repo does not have",
            hint="re-run `fabric plan`: the plan is older than the site repo",
        )
        for r in replicas
        if r.node not in site.nodes
    ]
    missing_workers = sorted({n for r in replicas for n in r.worker_nodes if n not in site.nodes})
    problems += [
        Problem(f"a multi-node replica uses node `{n}`, which the site repo does not have", hint="re-run `fabric plan`")
        for n in missing_workers
    ]
    for node in {n for r in replicas for n in r.nodes if n in site.nodes}:
        problems += [
            Problem(p.message, file=site.path_of("nodes", node), field=p.field, hint=p.hint)
            for p in L.taint_problems(site.nodes[node], None)
        ]
    if problems:
        raise ConfigError(problems, summary="the plan cannot be turned into serving resources")


def replica_name(replica: ReplicaPlacement) -> str:
    return L.dns_name(replica.deployment, str(replica.index))


def _namespace(namespace: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": L.common_labels("serving", namespace)},
    }


def _priority_classes() -> list[Manifest]:
    def pclass(name: str, value: int, policy: str, description: str) -> Manifest:
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "labels": L.common_labels("serving", name)},
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": policy,
            "description": description,
        }

    return [
        pclass(
            PRIORITY_DEDICATED,
            100000,
            "PreemptLowerPriority",
            "replicas of a contributor's dedicated allocation: they reclaim lent GPUs",
        ),
        pclass(PRIORITY_POOL, 50000, "Never", "replicas serving the shared pool: they never preempt"),
    ]


def _network_policy(site: TrustedSite, site_id: str, namespace: str) -> Manifest:
    dns_peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    egress: list[dict[str, Any]] = [
        {"to": [dns_peer], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    ]
    allowed = site.config.sites[site_id].egress_allowed
    if allowed:
        egress.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in allowed]})
    egress.append(probes.canary_egress())
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": "llm-fabric-serving-egress",
            "namespace": namespace,
            "labels": L.common_labels("serving", "egress"),
        },
        "spec": {"podSelector": {"matchLabels": dict(ENGINE_LABELS)}, "policyTypes": ["Egress"], "egress": egress},
    }


def _ingress_policy(site: TrustedSite, site_id: str, namespace: str) -> Manifest:
    """Who reaches an engine: the site's gateway (requests), the canary prober (its prompts), the site's
    Prometheus (`/metrics`, on the same port as the API) and the workers of a multi-node replica (the
    leader's data-parallel RPC; any port). The gateway's inference-extension routing adds its own policy
    for the inference Gateway and the endpoint pickers (gateway/objects/gateway.py)."""
    api = [{"protocol": "TCP", "port": ENGINE_PORT}]
    peers = [
        {"podSelector": {"matchLabels": dict(L.GATEWAY_LABELS)}},
        {"podSelector": {"matchLabels": dict(CANARY_PROBER_LABELS)}},
        prometheus_peer(site.config.sites[site_id].cluster.prometheus_namespace),
    ]
    rules: list[dict[str, Any]] = [
        {"from": peers, "ports": api},
        {"from": [{"podSelector": {"matchLabels": dict(ENGINE_WORKER_LABELS)}}]},
    ]
    labels = L.common_labels("serving", "ingress")
    return network_policy("llm-fabric-serving-ingress", namespace, labels, ENGINE_LABELS, "Ingress", rules)


_RELABEL = {"deployment": L.DEPLOYMENT, "replica": L.REPLICA, "owner": L.OWNER, "site": L.SITE, "node": L.NODE}


def _meta_label(label: str) -> str:
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def _pod_monitor(namespace: str) -> Manifest:
    relabelings = [
        {"action": "replace", "sourceLabels": [_meta_label(label)], "targetLabel": target}
        for target, label in _RELABEL.items()
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": "llm-fabric-engines",
            "namespace": namespace,
            "labels": L.common_labels("serving", "engines"),
        },
        "spec": {
            "selector": {"matchLabels": dict(ENGINE_LABELS)},
            "podMetricsEndpoints": [
                {"port": "http", "path": "/metrics", "interval": "30s", "relabelings": relabelings}
            ],
        },
    }


def _service(deployment: str, namespace: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": deployment,
            "namespace": namespace,
            "labels": L.common_labels("serving", deployment) | {L.DEPLOYMENT: deployment},
        },
        "spec": {
            "selector": ENGINE_LABELS | {L.DEPLOYMENT: deployment},
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def replica_labels(replica: ReplicaPlacement, queue: str, surge: tuple[str, str] | None = None) -> dict[str, str]:
    name = surge[0] if surge else replica_name(replica)
    labels = L.common_labels("engine", name) | ENGINE_LABELS
    labels["app.kubernetes.io/name"] = replica.engine
    labels |= {
        L.DEPLOYMENT: replica.deployment,
        L.REPLICA: name,
        L.OWNER: replica.owner,
        L.SITE: replica.site,
        L.NODE: replica.node,
        L.QUEUE_NAME: queue,
    }
    if replica.dedicated_for:
        labels[L.DEDICATED_FOR] = replica.dedicated_for
    if surge:
        labels[SURGE_FOR] = surge[1]
    return labels


def startup_failure_threshold(
    node: NodeManifest, replica: ReplicaPlacement, options: StackOptions, weights_bytes: int | None = None
) -> int:
    """Probe attempts to cover a cold start. Staged weights (`weights_bytes`, the lock's size of the checkpoint)
    are read at the node's measured speed (engine.capacity.cold_start, the rollout review's estimate); an
    unpinned checkpoint is bounded by what fits in the replica's GPU memory, streamed from disk."""
    if weights_bytes is not None:
        return math.ceil(startup_budget_s(weights_bytes, node.host.storage_read_mb_s) / PROBE_PERIOD)
    gpu_gb = len(replica.gpu_indices) * node.gpus.memory_mib * 1024 * 1024 / 1e9
    budget = options.startup_base_seconds + options.startup_seconds_per_gb * gpu_gb
    return math.ceil(budget / PROBE_PERIOD)


def engine_arguments(replica: ReplicaPlacement) -> list[str]:
    """The plan's args; the port is the fabric's, so it is added unless the plan already set it."""
    args = list(replica.engine_args)
    if not any(a == "--port" or a.startswith("--port=") for a in args):
        args += ["--port", str(ENGINE_PORT)]
    return args


def _container(render: ReplicaRender) -> dict[str, Any]:
    replica, node, options, pinned = render.replica, render.node, render.options, render.pinned
    resource = L.GPU_RESOURCE[node.gpus.vendor]
    engine = backend(replica.engine)
    env = {"HF_HOME": MODELS_DIR, "HF_HUB_OFFLINE": "1"} | replica.engine_env | dict(engine.container_env)
    nvidia_image, amd_image = engine.image_options
    image = str(getattr(options, amd_image if node.gpus.vendor == "amd" else nvidia_image))
    args = engine_arguments(replica)
    if pinned is not None:
        args = weights.loader_args(replica, args)
    startup = startup_failure_threshold(node, replica, options, pinned.locked.size if pinned else None)
    # the canary probes no surge: the prober's verdict and drain mark at a surge's index are the restarting
    # replica's (readiness reading the verdict would take the surge out of the Service exactly while it must
    # serve; its drain, when the next render removes it, would take the restarted replica out of the gateway's
    # rotation). The gateway reaches a surge through the deployment's Service.
    probed = probes.container_probes(
        replica, args, render.namespace, render.capacity, startup, PROBE_PERIOD, canary=render.surge is None
    )
    return {
        "name": replica.engine,
        "image": image,
        "command": list(engine.launcher),
        "args": args,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "ports": [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
        "resources": {"limits": {resource: str(len(replica.gpu_indices))}},
        **probed,
        "volumeMounts": [
            {"name": "models", "mountPath": "/models"},
            {"name": "shm", "mountPath": "/dev/shm"},
            probes.canary_token_mount(),  # the preStop's drain notice carries the prober's write token
        ],
    }


def _pod_spec(render: ReplicaRender, hosts: list[str], container: dict[str, Any], name: str) -> dict[str, Any]:
    replica, node, options = render.replica, render.node, render.options
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": L.HOSTNAME, "operator": "In", "values": hosts}]}]
            }
        }
    }
    if replica.worker_nodes:  # one pod of a group per node: each takes all of its node's GPUs
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {L.REPLICA: name}}, "topologyKey": L.HOSTNAME}
            ]
        }
    tolerations = [t.as_toleration() for t in L.node_taints(node)]
    tolerations.append({"key": L.GPU_RESOURCE[node.gpus.vendor], "operator": "Exists", "effect": "NoSchedule"})
    spec: dict[str, Any] = {
        "priorityClassName": PRIORITY_DEDICATED if replica.dedicated_for else PRIORITY_POOL,
        "affinity": affinity,
        "tolerations": tolerations,
        "terminationGracePeriodSeconds": probes.TERMINATION_GRACE_S,
        "containers": [container],
        "volumes": [
            {"name": "models", "hostPath": {"path": options.model_cache_path, "type": "Directory"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size}},
            # optional: without the Secret the engine serves and its drain notice is refused (said in its line)
            probes.canary_token_volume(optional=True),
        ],
    }
    if render.pinned is not None:  # every node of a replica reads its own cache: each pod checks it
        weights.attach_check(spec, replica, render.pinned)
    return spec


def _annotations(render: ReplicaRender) -> dict[str, str]:
    replica = render.replica
    out = {
        "fabric.llm/gpu-indices": ",".join(str(i) for i in replica.gpu_indices),
        L.GPU_MODEL: replica.gpu_model,
        "fabric.llm/engine": replica.engine,
        "fabric.llm/quantization": replica.quantization,
        "fabric.llm/data-classes": ",".join(replica.data_classes),
    }
    if replica.worker_nodes:
        out["fabric.llm/nodes"] = ",".join(replica.nodes)
    out[FINGERPRINT_ANNOTATION] = replica.config_fingerprint.sha256
    if render.pinned is not None:
        out |= weights.revision_annotation(render.pinned)
    if render.surge:
        out[SURGE_FOR] = render.surge[1]
    return out


def _metadata(labels: dict[str, str], namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"name": labels[L.REPLICA], "namespace": namespace, "labels": labels, "annotations": annotations}


def _surge_workload(surge: SurgeReplica, render: ReplicaRender) -> Manifest:
    """A surge replica: the replica's workload under its own name (its own selector, so neither the replica's
    Deployment nor its direct Service takes its pods), with the deployment's labels (the deployment's Service,
    PodDisruptionBudget and PodMonitor do) and `llm-fabric.io/surge-for` naming the replica it stands in for;
    its probes leave the canary out (`_container`)."""
    deployment = surge.placement.deployment
    name = surge_name(deployment, surge.replaces)
    stands_in_for = L.dns_name(deployment, str(surge.replaces))
    return _workload(replace(render, surge=(name, stands_in_for)))


def _workload(render: ReplicaRender) -> Manifest:
    """The replica's Deployment (a LeaderWorkerSet across nodes)."""
    replica = render.replica
    if replica.worker_nodes:
        return _leader_worker_set(render)
    labels = replica_labels(replica, render.queue, render.surge)
    selector = {L.REPLICA: labels[L.REPLICA], L.DEPLOYMENT: replica.deployment}
    pod_spec = _pod_spec(render, [replica.node], _container(render), labels[L.REPLICA])
    annotations = _annotations(render)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(labels, render.namespace, annotations),
        "spec": {
            "replicas": 1,
            # two pods of one replica would need twice its GPUs: stop the old one first
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
        },
    }


# The values of a worker's command line that depend on its place in the group: LeaderWorkerSet sets
# LWS_LEADER_ADDRESS and LWS_WORKER_INDEX (1, 2, ...) in every pod; a shell expands them.
_WORKER_RANK_VALUES = {
    "--node-rank": "${LWS_WORKER_INDEX}",
    "--master-addr": "${LWS_LEADER_ADDRESS}",
    "--data-parallel-address": "${LWS_LEADER_ADDRESS}",
}


def worker_script(replica: ReplicaPlacement, gpus_per_node: int) -> str:
    """`exec vllm serve ...` for the group's workers: the node-rank-1 arguments of the plan, with the values
    that depend on the worker's index taken from LeaderWorkerSet's environment."""
    args = list(replica.worker_engine_args)
    out: list[str] = []
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in _WORKER_RANK_VALUES and i + 1 < len(args):
            out += [flag, _WORKER_RANK_VALUES[flag]]
            i += 2
        elif flag == "--data-parallel-start-rank" and i + 1 < len(args):
            out += [flag, f"$((LWS_WORKER_INDEX * {gpus_per_node}))"]
            i += 2
        else:
            out.append(shlex.quote(flag))
            i += 1
    return "exec vllm serve " + " ".join(out)


def _leader_worker_set(render: ReplicaRender) -> Manifest:
    """A multi-node replica: one LeaderWorkerSet group, the leader (API server) on `replica.node`, one headless
    worker on each other node. Kueue admits the group as one workload (the queue label on the set), so the
    GPUs of every node count against the queue together; a pod failing (a drained node) restarts the group."""
    replica = render.replica
    labels = replica_labels(replica, render.queue, render.surge)
    annotations = _annotations(render)
    name = labels[L.REPLICA]
    leader = _pod_spec(render, [replica.node], _container(render), name)
    worker_container = _container(render)
    worker_container["command"] = ["/bin/sh", "-c"]
    worker_args = (
        weights.loader_args(replica, replica.worker_engine_args) if render.pinned else replica.worker_engine_args
    )
    worker = replica.model_copy(update={"worker_engine_args": worker_args})
    worker_container["args"] = [worker_script(worker, len(replica.gpu_indices))]
    for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe", "lifecycle"):  # headless: no API server
        worker_container.pop(key)
    worker_spec = _pod_spec(render, list(replica.worker_nodes), worker_container, name)
    # the Service and the PodMonitor select component=engine: workers serve neither requests nor metrics
    worker_labels = labels | ENGINE_WORKER_LABELS
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(labels, render.namespace, annotations),
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": len(replica.nodes),
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": labels, "annotations": annotations}, "spec": leader},
                "workerTemplate": {
                    "metadata": {"labels": worker_labels, "annotations": annotations},
                    "spec": worker_spec,
                },
            },
        },
    }
