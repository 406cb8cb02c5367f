"""`fabric check live`: does every engine run the configuration the plan gave its replica?

Each replica's engine is asked for the configuration it reports (its backend's `reported_config`:
vLLM's `/v1/models`, `/version` and `vllm:cache_config_info`; SGLang's `/get_server_info`), and
each reported field is compared with what the plan's own engine arguments for that replica set
(`planned_config`), and the engine release with the replica's configuration fingerprint where the
plan pins one. A field the engine does not report is not judged here (the canaries judge answers).
An engine that does not answer is drift of the field `reachable`: nothing says it runs the plan.
The same findings are a Prometheus exposition (`exposition`): `fabric_replica_config_drift` is 1
per differing field and 0 per field that agrees, by deployment, replica (the rendered replica
name, as on the engine's own series) and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from llm_fabric.engine.backends import backend
from llm_fabric.engine.reported import EngineUnreachable, Reported
from llm_fabric.errors import UsageError
from llm_fabric.plan.document import Plan, ReplicaPlacement
from llm_fabric.serving.workloads import replica_name

DRIFT_METRIC = "fabric_replica_config_drift"
REACHABLE = "reachable"


@dataclass(frozen=True)
class FieldDrift:
    field: str
    planned: object
    reported: object


@dataclass(frozen=True)
class ReplicaCheck:
    deployment: str
    index: int
    replica: str  # the rendered replica name
    url: str
    engine: str
    agreeing: list[str] = field(default_factory=list)
    drifts: list[FieldDrift] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.deployment}/{self.index}"


@dataclass(frozen=True)
class LiveCheck:
    replicas: list[ReplicaCheck]
    unchecked: list[str]  # replicas of the plan no endpoint was given for

    @property
    def drift(self) -> bool:
        return any(r.drifts for r in self.replicas)

    def as_dict(self) -> dict[str, object]:
        return {
            "drift": self.drift,
            "replicas": [
                {
                    "replica": r.name,
                    "url": r.url,
                    "engine": r.engine,
                    "agreeing": r.agreeing,
                    "drifts": [{"field": d.field, "planned": d.planned, "reported": d.reported} for d in r.drifts],
                }
                for r in self.replicas
            ],
            "unchecked": self.unchecked,
        }


def endpoint_pairs(values: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise UsageError(
                f"--endpoint `{value}` is not REPLICA=URL", hint="e.g. --endpoint qwen3-5/0=http://127.0.0.1:8000"
            )
        out.append((name, url))
    return out


def endpoints_of(plan: Plan, values: list[tuple[str, str]]) -> dict[tuple[str, int], str]:
    """`DEPLOYMENT/INDEX` -> engine base URL, each a replica of the plan (UsageError naming the plan's otherwise)."""
    known = {(r.deployment, r.index) for r in plan.replicas}
    out: dict[tuple[str, int], str] = {}
    for name, url in values:
        deployment, _, index = name.rpartition("/")
        key = (deployment, int(index)) if index.isdigit() else None
        if key is None or key not in known:
            raise UsageError(
                f"--endpoint `{name}` is not a replica of the plan",
                hint="name a replica DEPLOYMENT/INDEX, one of: " + ", ".join(f"{d}/{i}" for d, i in sorted(known)),
            )
        base = url.rstrip("/")
        out[key] = base.removesuffix("/v1")  # the engines' configuration endpoints are at the root
    if not out:
        raise UsageError(
            "no engine to ask: pass --endpoint DEPLOYMENT/INDEX=URL for each replica to check",
            hint="e.g. --endpoint qwen3-5/0=http://127.0.0.1:8000",
        )
    return out


def _compare(planned: Reported, reported: Reported) -> tuple[list[str], list[FieldDrift]]:
    agreeing: list[str] = []
    drifts: list[FieldDrift] = []
    for name in sorted(planned):
        if name not in reported:
            continue
        if planned[name] == reported[name]:
            agreeing.append(name)
        else:
            drifts.append(FieldDrift(name, planned[name], reported[name]))
    return agreeing, drifts


def check_replica(replica: ReplicaPlacement, url: str, timeout: float) -> ReplicaCheck:
    engine = backend(replica.engine)
    planned = engine.planned_config(replica.engine_args)
    version = replica.config_fingerprint.fields.engine_version
    if version is not None:
        planned["engine_version"] = version
    agreeing: list[str] = []
    try:
        reported = engine.reported_config(url, timeout)
    except EngineUnreachable as exc:
        drifts = [FieldDrift(REACHABLE, True, exc.message)]
    else:
        agreeing, drifts = _compare(planned, reported)
        agreeing.insert(0, REACHABLE)
    return ReplicaCheck(replica.deployment, replica.index, replica_name(replica), url, replica.engine, agreeing, drifts)


def check_live(plan: Plan, endpoints: dict[tuple[str, int], str], *, timeout: float = 10.0) -> LiveCheck:
    checks = [
        check_replica(r, endpoints[(r.deployment, r.index)], timeout)
        for r in plan.replicas
        if (r.deployment, r.index) in endpoints
    ]
    unchecked = [f"{r.deployment}/{r.index}" for r in plan.replicas if (r.deployment, r.index) not in endpoints]
    return LiveCheck(checks, unchecked)


def exposition(check: LiveCheck) -> str:
    """The findings as Prometheus text: 1 per differing field, 0 per agreeing one."""
    registry = CollectorRegistry()
    gauge = Gauge(
        DRIFT_METRIC,
        "1 where a running engine reports another value for a configuration field than its plan set.",
        ["deployment", "replica", "field"],
        registry=registry,
    )
    for r in check.replicas:
        for name in r.agreeing:
            gauge.labels(r.deployment, r.replica, name).set(0)
        for drift in r.drifts:
            gauge.labels(r.deployment, r.replica, drift.field).set(1)
    return generate_latest(registry).decode()
