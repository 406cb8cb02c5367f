"""The site repo's `weights.lock` between the base and the change: which checkpoints are added, removed,
or pinned to other bytes (a new revision, or the same revision with other files)."""

from __future__ import annotations

from llm_fabric.plan.document import WeightsChange
from llm_fabric.site.weights_lock import LockedCheckpoint, WeightsLock


def _files_changed(before: LockedCheckpoint, after: LockedCheckpoint) -> list[str]:
    old = {f.path: (f.size, f.sha256) for f in before.files}
    new = {f.path: (f.size, f.sha256) for f in after.files}
    return sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))


def _change(name: str, before: LockedCheckpoint | None, after: LockedCheckpoint | None) -> WeightsChange | None:
    if before is None:
        if after is None:
            return None
        return WeightsChange(
            checkpoint=name,
            change="added",
            revision_after=after.revision,
            files_changed=sorted(f.path for f in after.files),
            bytes_after=after.size,
        )
    if after is None:
        return WeightsChange(
            checkpoint=name,
            change="removed",
            revision_before=before.revision,
            files_changed=sorted(f.path for f in before.files),
            bytes_before=before.size,
        )
    files = _files_changed(before, after)
    if not files and before.revision == after.revision:
        return None
    return WeightsChange(
        checkpoint=name,
        change="changed",
        revision_before=before.revision,
        revision_after=after.revision,
        files_changed=files,
        bytes_before=before.size,
        bytes_after=after.size,
    )


def diff_locks(base: WeightsLock, new: WeightsLock) -> list[WeightsChange]:
    names = sorted(base.checkpoints.keys() | new.checkpoints.keys())
    changes = (_change(n, base.checkpoints.get(n), new.checkpoints.get(n)) for n in names)
    return [c for c in changes if c is not None]
