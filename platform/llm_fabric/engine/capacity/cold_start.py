"""How long a replica takes from a started container to its first answer: the one estimate the rollout
review (`review/rollout.py`) and the startup probe's budget (`serving/workloads.py`) share.

A cold start is the engine's own start (process, device init, graph capture or compile, which a compile
cache on the node shortens but never removes) plus reading the weights from the node's model cache at
the speed measured at enrolment (`HostInventory.storage_read_mb_s`). Weights are counted in bytes: the
staged size from `weights.lock` where the checkpoint is pinned, else the plan's estimate of the
replica's weights. A node enrolled before the speed was measured reads at `DEFAULT_READ_MB_S`, a
conservative figure for a local NVMe disk behind a page cache that is cold after a reboot.
"""

from __future__ import annotations

import math

ENGINE_INIT_S = 180  # seed 002: most of an 8 B model's 11-minute cold start was not the weights
DEFAULT_READ_MB_S = 500.0
PROBE_MARGIN = 2.0  # the startup probe waits this many estimates before the kubelet restarts the engine


def read_seconds(weights_bytes: int, read_mb_s: float | None) -> float:
    """Seconds to read the weights once at the node's measured speed (or the default)."""
    speed = read_mb_s if read_mb_s is not None and read_mb_s > 0 else DEFAULT_READ_MB_S
    return weights_bytes / (speed * 1e6)


def cold_start_s(weights_bytes: int, read_mb_s: float | None) -> int:
    """The expected cold start in whole seconds (what a rollout wave is said to take)."""
    return math.ceil(ENGINE_INIT_S + read_seconds(weights_bytes, read_mb_s))


def startup_budget_s(weights_bytes: int, read_mb_s: float | None) -> int:
    """What the startup probe allows before a restart: the estimate with a margin, so a slow start is not
    killed half-way through its weights (seed 002: "a pod that's still loading should report not ready,
    not get killed")."""
    return math.ceil(PROBE_MARGIN * cold_start_s(weights_bytes, read_mb_s))
