"""The plan document: which replica of which deployment runs on which node and GPUs, with what engine args.

One versioned document (`apiVersion: llm-fabric/v1`, `kind: Plan`) is what `fabric plan -o` (and
`--json`) writes and what every reader loads with `load_plan`: `fabric render --plan`, the Pulumi
stacks' `planFile`, `fabric report --plan`. `llm_fabric.plan.planning.plan_site` makes it; the
resource builders (Kubernetes, Pulumi, YAML) read `Plan.replicas` and nothing else of the site repo's
placement. A plan that misses a target says so in `shortfalls` (in words) and `complete` is False:
callers that deploy must refuse it (`require_complete()`), never deploy part of it silently, unless
every shortfall is one that cordoned nodes cause (`Shortfall.out_of_service`, `degraded`): a cordon
is always deployable, and what it costs is stated (the shortfall, the owners' `dedicated_shortfall_gpus`). A plan
made with `--base` carries its `diff` against that revision; readers that deploy ignore it.
Each replica carries what every reader needs of it, resolved once by the planner: the checkpoint it
loads and the revision `weights.lock` pins it at, the name it is served under, its context length, its
engine and its configuration fingerprint (`engine.fingerprint`: what can change an answer). Readers
(render, the stacks, the gateway's config, canary, probes, weights, the load test) take them from the
replica and derive none of them again. A plan written before replicas carried them is refused by
`load_plan` naming the missing field and `fabric plan -o`, which writes it again; a fingerprint whose
sha256 is not its fields' digest is refused like any invalid plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field, ValidationError

from llm_fabric.atomicio import write_atomic
from llm_fabric.basemodel import FabricModel
from llm_fabric.engine.capacity.parallelism import Layout
from llm_fabric.engine.fingerprint import ConfigFingerprint
from llm_fabric.engine.recipes import DEFAULT_ENGINE, EngineName
from llm_fabric.errors import ConfigError, PolicyRefusal, Problem, UsageError
from llm_fabric.policies.violations import Violation


class ReplicaPlacement(FabricModel):
    deployment: str
    index: int = Field(ge=0, description="0-based replica number within the deployment")
    node: str
    site: str
    owner: str = Field(description="the node's owner (contributing tenant)")
    gpu_indices: list[int] = Field(description="GPU indices on the node (CUDA_VISIBLE_DEVICES order)")
    gpu_model: str = Field(description="GPU catalog id")
    tensor_parallel_size: int = Field(ge=1)
    parallelism: Literal["tp", "dp-ep"] = Field(
        "tp", description="tp: tensor (+ pipeline) parallel; dp-ep: DP attention + EP"
    )
    data_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1, description="> 1: one pipeline stage per node of the group")
    worker_nodes: list[str] = Field(
        default_factory=list,
        description="a multi-node replica's other nodes (node is its leader); each gives all its GPUs",
    )
    quantization: str
    checkpoint: str = Field(description="Hugging Face repo id of the weights its recipe loads in its quantization")
    revision: str | None = Field(
        description="the revision the site repo's weights.lock pins the checkpoint at; None: not pinned"
    )
    engine: EngineName = Field(DEFAULT_ENGINE, description="the serving engine (the deployment's or recipe's)")
    served_model_name: str = Field(description="the model name the engine answers to (the deployment's)")
    context_length: int = Field(ge=1, description="the engine's context (--max-model-len, SGLang's --context-length)")
    engine_args: list[str] = Field(
        description="the engine's arguments: after `vllm serve` (model first) or `python3 -m sglang.launch_server`"
    )
    worker_engine_args: list[str] = Field(
        default_factory=list, description="a multi-node replica's arguments on its second node (node rank 1)"
    )
    engine_env: dict[str, str] = Field(default_factory=dict)
    config_fingerprint: ConfigFingerprint = Field(description="what can change an answer (engine.fingerprint)")
    dedicated_for: str | None = Field(None, description="tenant whose traffic this replica serves first")
    data_classes: list[str]

    @property
    def nodes(self) -> list[str]:
        """Every node of the replica, the leader first."""
        return [self.node, *self.worker_nodes]

    @property
    def gpus(self) -> int:
        """GPUs the replica takes, all its nodes together."""
        return len(self.gpu_indices) * len(self.nodes)

    def layout(self, gpus_per_node: int) -> Layout:
        return Layout(
            self.parallelism,
            self.tensor_parallel_size,
            self.pipeline_parallel_size,
            self.data_parallel_size,
            gpus_per_node,
        )


class SpeedFigures(FabricModel):
    """Output speed of a deployment, all replicas, every p50 slot busy: a ceiling or the expected figure."""

    output_tokens_per_s_total: float
    output_tokens_per_s_per_user: float
    itl_ms: float
    ttft_ms: float
    error_band: tuple[float, float] | None = Field(
        None, description="expected only: measured/expected ranged over these factors in the calibration"
    )


class DeploymentCapacity(FabricModel):
    """Capacity of a deployment as planned (summed over its replicas)."""

    deployment: str
    recipe: str
    quantization: str
    kv_cache_dtype: str | None = None
    replicas_wanted: int = Field(description="replicas asked for, or needed to meet the target")
    replicas_planned: int
    target_sessions: int | None = None
    target_context_tokens: int | None = None
    context_p50: int
    context_p95: int
    weights_gb: float = Field(description="weights per replica (decimal GB)")
    kv_pool_gb: float = Field(description="KV cache pool per replica (decimal GB)")
    max_concurrency_p50: int = Field(description="sessions at the p50 context, all replicas")
    max_concurrency_p95: int = Field(description="sessions at the p95 context, all replicas")
    max_concurrency_target: int | None = Field(None, description="sessions at the target's context, all replicas")
    decode_tokens_per_s_single: float = Field(description="ceiling: one stream alone, slowest replica")
    decode_tokens_per_s_per_user: float = Field(description="ceiling: per stream with every p50 slot busy")
    decode_tokens_per_s_total: float = Field(description="ceiling: all replicas, every p50 slot busy")
    ceiling: SpeedFigures | None = Field(None, description="roofline, prefill included, every p50 slot busy")
    expected: SpeedFigures | None = Field(None, description="calibrated, with its error band, every p50 slot busy")
    parallelism: str = Field("", description="the replicas' layouts, e.g. DP 8 + EP (data-parallel attention)")
    multi_node: str | None = Field(None, description="why a multi-node replica was or was not possible")
    engine_summary: str = Field(description="the engine args that matter, in one line")
    data_classes: list[str]
    prompt_logging: bool = Field(description="false when any data class it serves forbids logging prompts")
    external_fallback: bool = Field(description="true only when every data class it serves allows it")
    met: bool


class Shortfall(FabricModel):
    """A target the plan does not meet, and why, in words."""

    deployment: str
    wanted: int
    planned: int
    unit: Literal["replicas", "sessions"]
    reasons: list[str]
    out_of_service: list[str] = Field(
        default_factory=list,
        description="cordoned nodes whose return would meet the target: a fault's cost, deployable meanwhile",
    )

    def to_problem(self) -> Problem:
        return Problem(
            f"deployment `{self.deployment}`: planned {self.planned} of {self.wanted} {self.unit}",
            field=f"deployments/{self.deployment}",
            hint="; ".join(self.reasons),
        )


class OwnerAllocation(FabricModel):
    owner: str
    contributed_gpus: int
    dedicated_gpus: int = Field(description="GPUs held for the owner's own traffic")
    lent_gpus: int = Field(description="contributed GPUs the pool may use")
    used_by_pool_gpus: int = Field(description="of the owner's GPUs, those running pool replicas")
    lend_surplus: bool = Field(description="idle dedicated capacity is lent to the pool at run time")
    out_of_service_gpus: int = Field(0, description="GPUs of the owner's cordoned nodes (not in contributed_gpus)")
    out_of_service_nodes: list[str] = Field(default_factory=list, description="the owner's cordoned nodes")
    dedicated_shortfall_gpus: int = Field(
        0, description="dedicated GPUs no in-service GPU of the owner stands behind while its nodes are cordoned"
    )


class SpareHold(FabricModel):
    """Capacity the plan keeps free for faults (the policies' `spares`), or what became of it."""

    scope: Literal["gpu_model", "deployment"]
    name: str = Field(description="the GPU model or the deployment it is kept for")
    state: Literal["held", "in use", "not held"] = Field(
        description="in use: a cordoned node it covers released it, and its seat takes that node's replicas first"
    )
    node: str | None = Field(None, description="where it is held (held), or was held in the base plan (in use)")
    site: str | None = None
    owner: str | None = None
    gpu_model: str | None = None
    gpu_indices: list[int] = Field(default_factory=list)
    covers: list[str] = Field(default_factory=list, description="in use: the cordoned nodes that released it")
    reason: str = Field("", description="in words: why it is in use or not held")

    @property
    def key(self) -> str:
        return f"spare/{self.scope}/{self.name}"

    @property
    def gpus(self) -> int:
        """GPUs held back from the pool (only while held)."""
        return len(self.gpu_indices) if self.state == "held" else 0


class SiteUsage(FabricModel):
    site: str
    country: str
    gpus_total: int
    gpus_used: int
    gpus_free: int


class NodeEntry(FabricModel):
    """A node of the site repo as the plan saw it: what a review compares (`PlanDiff.nodes`)."""

    name: str
    site: str
    owner: str
    status: Literal["active", "cordoned", "retired"]
    gpus: int = Field(description="GPUs on the node, whatever its status")
    gpu_model: str = Field(description="GPU catalog id")


class SolverReport(FabricModel):
    status: Literal["optimal", "feasible", "first-fit", "infeasible", "unknown", "model_invalid", "trivial"] = Field(
        description="first-fit: the solver improved nothing within its time limit; the plan is the greedy start"
    )
    objective: float
    best_bound: float
    gap: float = Field(description="relative gap between the objective and the solver's bound (0 = proven optimal)")
    wall_seconds: float
    node_classes: int = Field(description="groups of interchangeable nodes the model reasons about")
    variables: int
    moves: int = Field(0, description="replicas moved or removed compared with the base plan")


class ReplicaChange(FabricModel):
    deployment: str
    index: int
    change: Literal["added", "moved", "removed", "engine"] = Field(
        description="engine: same seat, another serving engine (the replica restarts on it)"
    )
    before: str | None = None
    after: str | None = None


class CapacityDelta(FabricModel):
    deployment: str
    replicas_before: int
    replicas_after: int
    concurrency_p50_before: int
    concurrency_p50_after: int
    concurrency_p95_before: int
    concurrency_p95_after: int
    tokens_per_s_before: float
    tokens_per_s_after: float


NodeChangeKind = Literal["added", "removed", "retired", "cordoned", "uncordoned", "changed"]


class NodeChange(FabricModel):
    node: str
    site: str
    change: NodeChangeKind = Field(description="removed: its manifest is gone; changed: its GPUs, site or owner differ")
    before: str | None = Field(None, description="status and GPUs before, e.g. `active, 4x h200`")
    after: str | None = None


class GpuDelta(FabricModel):
    """Schedulable (active) GPUs of one class at one site, before and after."""

    site: str
    gpu_model: str
    gpus_before: int
    gpus_after: int


class SiteDelta(FabricModel):
    """A site's schedulable GPUs and the ones no replica uses, before and after."""

    site: str
    gpus_before: int
    gpus_after: int
    free_before: int
    free_after: int


class WeightsChange(FabricModel):
    """A checkpoint of the site repo's `weights.lock` added, removed or pinned to other bytes."""

    checkpoint: str = Field(description="Hugging Face repo id")
    change: Literal["added", "removed", "changed"]
    revision_before: str | None = None
    revision_after: str | None = None
    files_changed: list[str] = Field(default_factory=list, description="paths whose size or sha256 differ")
    bytes_before: int = Field(0, ge=0)
    bytes_after: int = Field(0, ge=0)
    remote_code_revision: str | None = Field(
        None,
        description="the revision whose code the engine pod runs: a recipe loading the checkpoint sets "
        "trust_remote_code (None: none does, or the checkpoint is removed)",
    )


class PlanDiff(FabricModel):
    base_revision: str
    nodes: list[NodeChange] = Field(default_factory=list)
    gpus: list[GpuDelta] = Field(default_factory=list)
    sites: list[SiteDelta] = Field(default_factory=list)
    replicas: list[ReplicaChange]
    capacity: list[CapacityDelta]
    new_violations: list[Violation]
    resolved_violations: list[Violation]
    new_shortfalls: list[Shortfall]
    resolved_shortfalls: list[Shortfall]
    weights: list[WeightsChange] = Field(default_factory=list, description="the weights lock's changes")

    @property
    def empty(self) -> bool:
        return not (
            self.weights
            or self.nodes
            or self.gpus
            or self.sites
            or self.replicas
            or self.capacity
            or self.new_violations
            or self.resolved_violations
            or self.new_shortfalls
            or self.resolved_shortfalls
        )


RestartReason = Literal["fingerprint", "weights", "node", "gpus", "engine", "added", "removed"]


class ReplicaRestart(FabricModel):
    """A replica of the base plan (or a new one) that the change starts, restarts or stops."""

    index: int = Field(ge=0)
    reason: RestartReason = Field(
        description="fingerprint: its configuration changed; weights: weights.lock pins other bytes; "
        "node/gpus: it moves; engine: another serving engine; added/removed: a new or gone replica"
    )
    before: str | None = Field(None, description="its seat before (diff.seat)")
    after: str | None = None


class SurgeReplica(FabricModel):
    """Make-before-break: a replica of the new configuration on free GPUs (or a spare), ready before the one it
    stands in for restarts, and gone once the change is done. Rendered as `<deployment>-surge-<replaces>`."""

    replaces: int = Field(ge=0, description="index of the replica it stands in for while that one restarts")
    placement: ReplicaPlacement = Field(description="where it runs: the new configuration, index = replaces")
    source: Literal["free", "spare"] = Field(description="free GPUs of the pool, or a spare the plan holds")


class RolloutWave(FabricModel):
    """One step of a deployment's rollout: its surges come up, then its restarts go (both only after the
    previous wave is ready)."""

    wave: int = Field(ge=1, description="1-based; the site's waves of one number are applied together")
    surges: list[int] = Field(default_factory=list, description="indices whose surge replica comes up in this wave")
    restarts: list[int] = Field(default_factory=list, description="indices restarted, started or stopped in this wave")
    serving: int = Field(ge=0, description="replicas of the deployment serving while the wave runs, surges included")
    target: int = Field(ge=0, description="replicas the plan wants")
    sessions_p50: int = Field(0, ge=0, description="sessions at the p50 context while the wave runs")
    cold_start_s: int = Field(0, ge=0, description="expected cold start of the wave's slowest replica")


class DeploymentRollout(FabricModel):
    deployment: str
    max_unavailable: int = Field(ge=1)
    restarts: list[ReplicaRestart] = Field(default_factory=list)
    surges: list[SurgeReplica] = Field(default_factory=list)
    waves: list[RolloutWave] = Field(default_factory=list)
    outage_s: int | None = Field(None, description="every replica down at once for about this long; None: never")
    outage_accepted: str | None = Field(None, description="the deployment's `rollout.accept_outage`")
    unordered_sites: list[str] = Field(
        default_factory=list,
        description="the sites where it restarts replicas, when more than one: each site's controller orders its "
        "own waves and waits for no other site, so their restarts can overlap",
    )
    down_at_once: int = Field(0, ge=0, description="the most replicas the rollout can have down at the same time")

    @property
    def refused(self) -> bool:
        """An outage nobody accepted: the change must find room for a surge or say it accepts the outage."""
        return self.outage_s is not None and self.outage_accepted is None

    def to_problem(self) -> Problem:
        minutes = max(1, round((self.outage_s or 0) / 60))
        if self.unordered_sites:
            sites = " and ".join(self.unordered_sites)
            return Problem(
                f"the change can take every replica of `{self.deployment}` down at once: its replicas at {sites} "
                f"restart under controllers that do not wait for each other, an outage of about {minutes} minutes",
                hint="add a replica at one of the sites, or set `rollout.accept_outage` in the deployment "
                "with the reason",
            )
        return Problem(
            f"the change takes every replica of `{self.deployment}` down at once: an outage of about {minutes} minutes",
            hint="enrol or free GPUs for a surge replica, add a replica, or set `rollout.accept_outage` "
            "in the deployment with the reason",
        )


class Rollout(FabricModel):
    """What a change restarts, in which order, against the `--base` revision (review/rollout.py)."""

    base_revision: str
    deployments: list[DeploymentRollout] = Field(default_factory=list, description="only those the change restarts")

    @property
    def refused(self) -> list[DeploymentRollout]:
        return [d for d in self.deployments if d.refused]

    @property
    def waves(self) -> int:
        return max((w.wave for d in self.deployments for w in d.waves), default=0)


API_VERSION: Final = "llm-fabric/v1"
KIND: Final = "Plan"


class Plan(FabricModel):
    apiVersion: Literal["llm-fabric/v1"] = API_VERSION
    kind: Literal["Plan"] = KIND
    federation: str
    replicas: list[ReplicaPlacement] = Field(default_factory=list)
    deployments: dict[str, DeploymentCapacity] = Field(default_factory=dict)
    shortfalls: list[Shortfall] = Field(default_factory=list)
    owners: dict[str, OwnerAllocation] = Field(default_factory=dict)
    sites: dict[str, SiteUsage] = Field(default_factory=dict)
    nodes: list[NodeEntry] = Field(default_factory=list, description="every node manifest, retired ones too")
    violations: list[Violation] = Field(default_factory=list)
    spares: list[SpareHold] = Field(default_factory=list, description="spare capacity: held, in use or not held")
    reclaim_order: list[str] = Field(default_factory=list)
    solver: SolverReport
    diff: PlanDiff | None = Field(None, description="what the change does, against the `--base` revision")
    rollout: Rollout | None = Field(None, description="how the change restarts replicas, against the `--base` revision")

    @property
    def complete(self) -> bool:
        return not self.shortfalls and not self.violations

    @property
    def degraded(self) -> list[Shortfall]:
        """Shortfalls that cordoned nodes cause: what a fault costs until the nodes are back in service."""
        return [s for s in self.shortfalls if s.out_of_service]

    @property
    def deployable(self) -> bool:
        """No rule broken and nothing short but what cordoned nodes leave short: a cordon never blocks the rest."""
        return (
            not self.violations
            and all(s.out_of_service for s in self.shortfalls)
            and (self.rollout is None or not self.rollout.refused)
        )

    def replicas_of(self, deployment: str) -> list[ReplicaPlacement]:
        return [r for r in self.replicas if r.deployment == deployment]

    def capacity_of(self, deployment: str) -> DeploymentCapacity:
        """The deployment's planned capacity and workload shape, or UsageError naming the plan's deployments."""
        if deployment in self.deployments:
            return self.deployments[deployment]
        raise UsageError(
            f"the plan for `{self.federation}` has no deployment `{deployment}`",
            hint="pick one of: " + (", ".join(sorted(self.deployments)) or "(none planned)"),
        )

    def require_complete(self) -> Plan:
        """The plan, or PolicyRefusal (exit 3) listing every violation and every shortfall that is not a
        cordoned node's (those are deployed as they are, and reported: `degraded`)."""
        if self.deployable:
            return self
        problems = [v.to_problem() for v in self.violations]
        problems += [s.to_problem() for s in self.shortfalls if not s.out_of_service]
        problems += [d.to_problem() for d in (self.rollout.refused if self.rollout else [])]
        raise PolicyRefusal(
            f"the plan for `{self.federation}` is incomplete ({len(problems)} problems)",
            problems=problems,
            hint="run `fabric plan -C DIR` to see the placement and the reasons",
        )


_REGENERATE = "write it again with `fabric plan -o FILE` of this fabric version"
# what every replica of a plan carries since the planner resolves it once for every reader; a plan without
# them was written by an older fabric (fingerprints were optional, the rest was derived by each reader)
REPLICA_FIELDS: Final = ("checkpoint", "revision", "served_model_name", "context_length", "config_fingerprint")


def plan_json(plan: Plan) -> str:
    """The document's text: what `fabric plan --json` prints and `fabric plan -o` writes."""
    return json.dumps(plan.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def write_plan(plan: Plan, path: Path) -> None:
    write_atomic(path, plan_json(plan))


def load_plan(path: Path) -> Plan:
    """The plan document at PATH; a clear error for a file that is not one, or of another apiVersion."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"cannot read the plan {path}: {reason}", hint=_REGENERATE) from exc
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [Problem(f"not JSON: {exc.msg}", file=path, line=exc.lineno, hint=_REGENERATE)],
            summary=f"{path} is not a plan document",
        ) from exc
    _check_header(path, data)
    _check_replica_fields(path, data)
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        problems = [
            Problem(str(e["msg"]), file=path, field=".".join(str(s) for s in e["loc"]) or None, hint=_REGENERATE)
            for e in exc.errors(include_url=False)
        ]
        raise ConfigError(problems, summary=f"{path} is not a valid plan ({exc.error_count()} problems)") from exc


def _check_header(path: Path, data: Any) -> None:
    if not isinstance(data, dict):
        raise ConfigError(
            [Problem("a plan document is a JSON object", file=path, hint=_REGENERATE)],
            summary=f"{path} is not a plan document",
        )
    version = data.get("apiVersion")
    if version is None and "plan" in data:
        message = "this is the envelope `fabric plan --json` printed before plans were versioned"
    elif version is None:
        message = "no `apiVersion`: not a plan document (or one from before plans were versioned)"
    elif version != API_VERSION:
        message = f"apiVersion `{version}` is not one this fabric reads (it reads `{API_VERSION}`)"
    elif data.get("kind") != KIND:
        message = f"kind `{data.get('kind')}` is not `{KIND}`"
    else:
        return
    raise ConfigError(
        [Problem(message, file=path, field="apiVersion", hint=_REGENERATE)], summary=f"{path} is not a plan document"
    )


def _check_replica_fields(path: Path, data: dict[str, Any]) -> None:
    """A plan from before replicas carried `REPLICA_FIELDS` refused as such, once, not field by field."""
    for field, replica in _replica_dicts(data):
        missing = [f for f in REPLICA_FIELDS if f not in replica or (f == "config_fingerprint" and not replica[f])]
        if not missing:
            continue
        names = ", ".join(f"`{f}`" for f in missing)
        message = (
            f"written by an older fabric: replica {replica.get('deployment')}/{replica.get('index')} has no {names} "
            f"(a `{API_VERSION}` plan of this fabric carries them in every replica)"
        )
        raise ConfigError(
            [Problem(message, file=path, field=f"{field}.{missing[0]}", hint=_REGENERATE)],
            summary=f"{path} is a plan of an older fabric",
        )


def _replica_dicts(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The document's replicas, and its rollout's surge placements, with where each is (a field path)."""
    out: list[tuple[str, Any]] = []
    replicas = data.get("replicas")
    out += [(f"replicas.{i}", r) for i, r in enumerate(replicas if isinstance(replicas, list) else [])]
    rollout = data.get("rollout")
    deployments = rollout.get("deployments") if isinstance(rollout, dict) else None
    for d, dep in enumerate(deployments if isinstance(deployments, list) else []):
        surges = dep.get("surges") if isinstance(dep, dict) else None
        for s, surge in enumerate(surges if isinstance(surges, list) else []):
            if isinstance(surge, dict):
                out.append((f"rollout.deployments.{d}.surges.{s}.placement", surge.get("placement")))
    return [(field, r) for field, r in out if isinstance(r, dict)]
