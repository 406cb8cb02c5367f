"""A checkpoint's snapshot in a Hugging Face cache, read into the lock's entry (every file's size and sha256).

The cache is huggingface_hub's layout under HF_HOME (the engine pods mount it as /models/hf):
`hub/models--ORG--NAME/snapshots/REVISION/PATH`, each file a symlink into `blobs/`, and `refs/main`
naming the revision the engine opens offline. The paths are the pod check's (engine/runtime/weights_check),
so the operator's side and the pod's side cannot disagree on where a file is."""

from __future__ import annotations

from pathlib import Path

from llm_fabric.engine.runtime.weights_check import file_sha256, snapshot_folder
from llm_fabric.errors import UsageError
from llm_fabric.site.weights_lock import LockedCheckpoint, LockedFile


def lock_snapshot(hf_home: Path, checkpoint: str, revision: str) -> LockedCheckpoint:
    """Every file of the snapshot (hidden files such as `.gitattributes` included: the engine reads them too)."""
    snapshot = snapshot_folder(hf_home, checkpoint, revision)
    if not snapshot.is_dir():
        raise UsageError(
            f"{checkpoint}@{revision} is not in the model cache: {snapshot} does not exist",
            hint="stage it first (`fabric weights stage`), or pass the cache it was staged into (--cache)",
        )
    paths = sorted((p.relative_to(snapshot).as_posix(), p) for p in snapshot.rglob("*") if p.is_file())
    files = [LockedFile(path=rel, size=p.stat().st_size, sha256=file_sha256(p)) for rel, p in paths]
    if not files:
        raise UsageError(f"{checkpoint}@{revision}: the snapshot {snapshot} has no files", hint="re-stage it")
    return LockedCheckpoint(revision=revision, files=files)
