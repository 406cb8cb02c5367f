"""An engine container's probes and its preStop drain, from the plan (issue 26 point 1).

Every probe but startup is an exec probe running `engine.runtime.probe` with the engine image's
Python (llm_fabric is installed in both engine images): no sidecar, no second image, no extra port or
NetworkPolicy hole for it, and the kubelet restarts the container whose probe it is. What differs per
engine (its health path, its running-requests gauge, the request fields that skip the loop guard and
put the probe first in a priority queue) comes from the backend.

- startup: `GET` the health path, sized by the weights (`serving.startup_failure_threshold`), as before;
- liveness: a streamed greedy completion of `PROMPT` (`LIVE_TOKENS` tokens) within a deadline from the
  plan's expected speed (`liveness_timing`); restart only after `SILENCE_S` of failing probes in a row;
- readiness: loaded (health path), not draining (the drain file), generating (the last liveness verdict:
  a replica that stopped generating leaves the Service at once, long before its restart), canary not
  failing (the canary prober's verdict, read with fail-open: an unreachable prober leaves it ready);
- preStop: `probe drain` marks the pod draining, tells the canary prober (`drain_notice_url`: the
  gateway takes the replica out of its rotation at its next refresh, see docs/gateway.md), and waits for
  its streams to finish.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from llm_fabric.engine.backends import backend
from llm_fabric.engine.command import ENGINE_PORT
from llm_fabric.engine.reported import flag
from llm_fabric.engine.request_hooks import request_fields
from llm_fabric.engine.runtime.probe import DEFAULT_TOKENS as LIVE_TOKENS
from llm_fabric.names import (
    CANARY_DRAIN,
    CANARY_PORT,
    CANARY_PROBER_LABELS,
    CANARY_TOKEN_DIR,
    CANARY_TOKEN_FILE,
    CANARY_TOKEN_SECRET,
    canary_replica_path,
)
from llm_fabric.names import ROTATION_REFRESH_S as REFRESH_S
from llm_fabric.names import canary_url as prober_url
from llm_fabric.plan.document import DeploymentCapacity, ReplicaPlacement

PROBE_MODULE = "llm_fabric.engine.runtime.probe"
# on the container's own filesystem: a restarted container is neither draining nor known not to generate
DRAIN_FILE = "/tmp/llm-fabric-draining"
LIVENESS_FILE = "/tmp/llm-fabric-liveness"  # the last liveness verdict, which readiness reads

# liveness: the answer's deadline is MARGIN x (a prompt of max_model_len tokens prefilled ahead of the
# probe + LIVE_TOKENS at the expected inter-token latency), within [MIN, MAX] seconds
DEADLINE_MARGIN = 2.0
DEADLINE_MIN_S = 10
DEADLINE_MAX_S = 240
DEADLINE_NO_FIGURES_S = 60  # a plan without speed figures for the deployment
LIVENESS_MIN_PERIOD_S = 60  # at most one probe a minute: 60 probes an hour
SILENCE_S = 300  # failing probes in a row for this long before the kubelet restarts the engine
KUBELET_SLACK_S = 5  # the kubelet's timeout sits past the program's own deadline, so the program says why

READINESS_PERIOD_S = 10
READINESS_FAILURES = 2
READINESS_TIMEOUT_S = 5  # the program's two GETs (health path, canary verdict) take 2 s each at most

TERMINATION_GRACE_S = 120
# the drain's wait before it counts requests: the Service's endpoints follow readiness (unready after
# READINESS_FAILURES periods, then one more), and the gateway's rotation reads the prober's drain mark
# within REFRESH_S; requests it admitted meanwhile are then counted and waited for
ROTATION_MARGIN_S = 5
DRAIN_SETTLE_S = max(
    READINESS_PERIOD_S * READINESS_FAILURES + READINESS_PERIOD_S, math.ceil(REFRESH_S) + ROTATION_MARGIN_S
)
ENGINE_STOP_S = 15  # of the grace period, left for the engine's own shutdown after the drain


@dataclass(frozen=True)
class LivenessTiming:
    """The liveness probe's figures and where they come from."""

    deadline_s: int
    period_s: int
    failure_threshold: int
    prefill_room_s: float
    decode_s: float
    source: str  # which speed figures of the plan: expected, ceiling, or none

    @property
    def timeout_s(self) -> int:
        return self.deadline_s + KUBELET_SLACK_S

    @property
    def silence_s(self) -> int:
        """Seconds of failing probes before a restart."""
        return self.period_s * self.failure_threshold

    @property
    def probes_per_hour(self) -> float:
        return 3600 / self.period_s


def liveness_timing(capacity: DeploymentCapacity | None, max_model_len: int | None) -> LivenessTiming:
    """The deadline: the plan's time to first token at the p50 context, scaled to a full `max_model_len`
    prompt ahead of the probe (room for the longest prefill), plus the probe's tokens at the expected
    inter-token latency with every p50 slot busy, times `DEADLINE_MARGIN`. The period leaves the kubelet's
    timeout room; the threshold makes `SILENCE_S` of failures in a row the only way to a restart."""
    speed = (capacity.expected or capacity.ceiling) if capacity is not None else None
    if capacity is None or speed is None:
        deadline, prefill, decode, source = DEADLINE_NO_FIGURES_S, 0.0, 0.0, "none"
    else:
        longest = max(max_model_len or capacity.context_p95, capacity.context_p50)
        prefill = speed.ttft_ms / 1000 * longest / max(1, capacity.context_p50)
        decode = LIVE_TOKENS * speed.itl_ms / 1000
        deadline = min(DEADLINE_MAX_S, max(DEADLINE_MIN_S, math.ceil(DEADLINE_MARGIN * (prefill + decode))))
        source = "expected" if capacity.expected is not None else "ceiling"
    period = max(LIVENESS_MIN_PERIOD_S, deadline + KUBELET_SLACK_S)
    return LivenessTiming(
        deadline_s=deadline,
        period_s=period,
        failure_threshold=max(2, math.ceil(SILENCE_S / period)),
        prefill_room_s=round(prefill, 2),
        decode_s=round(decode, 3),
        source=source,
    )


def engine_port(args: list[str]) -> str:
    return flag(args, "--port") or str(ENGINE_PORT)


def canary_url(replica: ReplicaPlacement, namespace: str) -> str:
    return prober_url(namespace) + canary_replica_path(replica.deployment, replica.index)


def drain_notice_url(replica: ReplicaPlacement, namespace: str) -> str:
    """The prober's `POST` that takes the replica out of the gateway's rotation (docs/canary.md)."""
    return canary_url(replica, namespace) + "/" + CANARY_DRAIN


def _probe(replica: ReplicaPlacement, args: list[str], verb: str) -> list[str]:
    """The head every probe command shares: the engine image's Python runs the probe module's `verb`."""
    return [backend(replica.engine).probe_traits.python, "-m", PROBE_MODULE, verb, "--port", engine_port(args)]


def live_command(replica: ReplicaPlacement, args: list[str], timing: LivenessTiming) -> list[str]:
    engine = backend(replica.engine)
    # skip the loop guard (a probe is no user's request) and, where the engine queues by priority, go first
    fields = request_fields(
        replica.engine,
        owner=True if engine.priority_scheduling(args) else None,
        loop_guard=False,
        low_values_first=engine.low_values_first(args),
    )
    command = _probe(replica, args, "live")
    command += ["--model", replica.served_model_name, "--deadline", str(timing.deadline_s)]
    command += ["--tokens", str(LIVE_TOKENS)]
    if fields:
        command += ["--fields", json.dumps(fields, sort_keys=True, separators=(",", ":"))]
    return [*command, "--state-file", LIVENESS_FILE]


def ready_command(replica: ReplicaPlacement, args: list[str], namespace: str, *, canary: bool = True) -> list[str]:
    """`canary`: the readiness reads the canary prober's verdict on the replica (False: a surge's)."""
    command = [
        *_probe(replica, args, "ready"),
        "--health-path",
        backend(replica.engine).probe_traits.health_path,
        "--drain-file",
        DRAIN_FILE,
        "--live-state-file",
        LIVENESS_FILE,
    ]
    return [*command, "--canary-url", canary_url(replica, namespace)] if canary else command


def drain_command(replica: ReplicaPlacement, args: list[str], namespace: str, *, canary: bool = True) -> list[str]:
    """`canary`: the drain tells the canary prober, which takes the replica out of the gateway's rotation."""
    command = [
        *_probe(replica, args, "drain"),
        "--drain-file",
        DRAIN_FILE,
        "--running-metric",
        backend(replica.engine).probe_traits.running_metric,
        "--settle",
        str(DRAIN_SETTLE_S),
        "--limit",
        str(TERMINATION_GRACE_S - ENGINE_STOP_S),
    ]
    notice = ["--notice-url", drain_notice_url(replica, namespace), "--notice-token-file", CANARY_TOKEN_FILE]
    return [*command, *notice] if canary else command


def container_probes(
    replica: ReplicaPlacement,
    args: list[str],
    namespace: str,
    capacity: DeploymentCapacity | None,
    startup_failures: int,
    startup_period: int,
    *,
    canary: bool = True,
) -> dict[str, Any]:
    """The container's `startupProbe`, `readinessProbe`, `livenessProbe` and `lifecycle` (its preStop).

    `canary=False` for a replica the canary prober does not probe (a surge): the prober's verdict and drain
    mark at its index are another replica's, so its readiness reads no verdict and its drain sends no notice."""
    traits = backend(replica.engine).probe_traits
    timing = liveness_timing(capacity, replica.context_length)
    return {
        "startupProbe": {
            "httpGet": {"path": traits.health_path, "port": "http"},
            "periodSeconds": startup_period,
            "timeoutSeconds": 5,
            "failureThreshold": startup_failures,
        },
        "readinessProbe": {
            "exec": {"command": ready_command(replica, args, namespace, canary=canary)},
            "periodSeconds": READINESS_PERIOD_S,
            "timeoutSeconds": READINESS_TIMEOUT_S,
            "failureThreshold": READINESS_FAILURES,
        },
        "livenessProbe": {
            "exec": {"command": live_command(replica, args, timing)},
            "periodSeconds": timing.period_s,
            "timeoutSeconds": timing.timeout_s,
            "failureThreshold": timing.failure_threshold,
        },
        "lifecycle": {"preStop": {"exec": {"command": drain_command(replica, args, namespace, canary=canary)}}},
    }


def canary_token_volume(*, optional: bool) -> dict[str, Any]:
    """The Secret volume of the prober's write token (`optional`: a pod that starts without it)."""
    secret = {"secretName": CANARY_TOKEN_SECRET, "items": [{"key": "token", "path": "token"}], "defaultMode": 0o400}
    return {"name": "canary-token", "secret": secret | ({"optional": True} if optional else {})}


def canary_token_mount() -> dict[str, Any]:
    return {"name": "canary-token", "mountPath": CANARY_TOKEN_DIR, "readOnly": True}


def canary_egress() -> dict[str, Any]:
    """The serving NetworkPolicy's rule that lets the readiness probe read the canary prober's verdict."""
    return {
        "to": [{"podSelector": {"matchLabels": dict(CANARY_PROBER_LABELS)}}],
        "ports": [{"protocol": "TCP", "port": CANARY_PORT}],
    }
