"""Checkpoints in a model cache pinned in `weights.lock`: each one's revision, every file's size and sha256.

The revision is resolved once: a checkpoint the lock already pins keeps its revision (pinning again
re-hashes the same snapshot and writes nothing when the bytes are the same), and its `ref` and
`accept_ref`; a new one takes the revision the cache's `refs/main` names, the snapshot the engine
opens offline, with the Hub ref `refs` says it was resolved from (stage: `main`). A cache's own
`refs/main` says nothing of where its commit came from, so `fabric weights lock` records no ref."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from llm_fabric.engine.runtime.weights_check import repo_folder
from llm_fabric.errors import ConfigError, Problem, UsageError
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.weights_lock import LOCK_FILE, REVISION_PATTERN, LockedCheckpoint, WeightsLock
from llm_fabric.weights.lock_file import lock_yaml, with_checkpoint, write_lock
from llm_fabric.weights.snapshot import lock_snapshot


@dataclass(frozen=True)
class Pinned:
    checkpoint: str
    revision: str
    files: int
    size: int
    state: Literal["pinned", "unchanged"]


@dataclass(frozen=True)
class PinResult:
    lock_path: Path
    written: bool
    checkpoints: list[Pinned]


def cached_revision(hf_home: Path, checkpoint: str) -> str:
    ref = repo_folder(hf_home, checkpoint) / "refs" / "main"
    try:
        revision = ref.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(
            f"`{checkpoint}` is not in the model cache ({ref}: {exc.strerror})",
            hint="stage it into this cache, or pass the cache it was staged into (--cache)",
        ) from exc
    if not re.fullmatch(REVISION_PATTERN, revision):
        raise UsageError(f"{ref} holds `{revision}`, not a commit (40 hex digits)", hint="re-stage the checkpoint")
    return revision


def _same_bytes(site: SiteRepo, hf_home: Path, name: str, before: LockedCheckpoint, now: LockedCheckpoint) -> None:
    """A commit's files never change: other bytes under a locked revision are a damaged cache, never a new pin."""
    old = {f.path: f for f in before.files}
    new = {f.path: f for f in now.files}
    differ = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
    if differ:
        problems = [
            Problem(
                f"{name}@{before.revision}: {p} "
                + ("is not in the lock" if p not in old else "is missing" if p not in new else "differs from the lock"),
                hint="delete the snapshot from the cache and stage it again; the lock stays as it is",
            )
            for p in differ
        ]
        raise ConfigError(
            problems, summary=f"the model cache {hf_home} does not hold the bytes {site.root / LOCK_FILE} pins"
        )


def pin_checkpoints(
    site: SiteRepo, hf_home: Path, checkpoints: list[str], refs: dict[str, str] | None = None
) -> PinResult:
    """`refs`: checkpoint -> the Hub ref its revision was resolved from, for checkpoints the lock does not pin yet."""
    lock: WeightsLock = site.weights_lock
    revisions: dict[str, str] = {}
    missing: list[Problem] = []
    for name in checkpoints:  # every checkpoint the cache lacks named at once, before any is hashed
        before = lock.checkpoints.get(name)
        try:
            revisions[name] = before.revision if before is not None else cached_revision(hf_home, name)
        except UsageError as exc:
            missing.append(Problem(exc.message, hint=exc.hint))
    if missing:
        raise ConfigError(
            missing, summary=f"the model cache {hf_home} lacks {len(missing)} checkpoint(s) the plan needs"
        )
    out: list[Pinned] = []
    for name in checkpoints:
        before = lock.checkpoints.get(name)
        revision = revisions[name]
        pinned = lock_snapshot(hf_home, name, revision)
        if before is not None:
            _same_bytes(site, hf_home, name, before, pinned)
            pinned = pinned.model_copy(update={"ref": before.ref, "accept_ref": before.accept_ref})
        else:
            pinned = pinned.model_copy(update={"ref": (refs or {}).get(name)})
        out.append(Pinned(name, revision, len(pinned.files), pinned.size, "pinned" if before is None else "unchanged"))
        lock = with_checkpoint(lock, name, pinned)
    path = site.root / LOCK_FILE
    written = not path.exists() or path.read_text(encoding="utf-8") != lock_yaml(lock)
    if written:
        write_lock(site.root, lock)
    return PinResult(path, written, out)
