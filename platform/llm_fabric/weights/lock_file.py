"""`weights.lock` written: stable ordering (checkpoints by repo id, files by path, one line per file), so
that its diff in a pull request reads as which files changed, and atomically, so a reader never sees half."""

from __future__ import annotations

from pathlib import Path

import yaml

from llm_fabric.atomicio import write_atomic
from llm_fabric.site.weights_lock import LOCK_FILE, LockedCheckpoint, WeightsLock

HEADER = (
    "# written by `fabric weights stage` (or `lock`): which bytes every replica loads (docs/weights.md)\n"
    "# a replica's pod refuses to start when its files differ from these\n"
)


def _entry(pinned: LockedCheckpoint) -> dict[str, object]:
    # `ref` and `accept_ref` only where set: a lock written before they existed reads the same
    entry: dict[str, object] = {"revision": pinned.revision}
    if pinned.ref is not None:
        entry["ref"] = pinned.ref
    if pinned.accept_ref is not None:
        entry["accept_ref"] = pinned.accept_ref
    entry["files"] = [f.model_dump() for f in sorted(pinned.files, key=lambda f: f.path)]
    return entry


def lock_yaml(lock: WeightsLock) -> str:
    checkpoints = {repo: _entry(pinned) for repo, pinned in sorted(lock.checkpoints.items())}
    # default_flow_style=None: a file's three fields on one line, everything above it in block style
    body = yaml.safe_dump(
        {"version": lock.version, "checkpoints": checkpoints}, sort_keys=False, default_flow_style=None, width=4096
    )
    return HEADER + body


def with_checkpoint(lock: WeightsLock, checkpoint: str, pinned: LockedCheckpoint) -> WeightsLock:
    return lock.model_copy(update={"checkpoints": lock.checkpoints | {checkpoint: pinned}})


def write_lock(site_root: Path, lock: WeightsLock) -> Path:
    path = site_root / LOCK_FILE
    write_atomic(path, lock_yaml(lock))
    return path
