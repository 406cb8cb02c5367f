"""The site repo's `weights.lock` between the base and the change: which checkpoints are added, removed,
or pinned to other bytes (a new revision, or the same revision with other files), and which of those
changes a review cannot accept (`lock_refusals`).

The lock is trusted only as a reviewed change whose content the review covers. Two changes are not:
- the same revision with other files or hashes than the base's lock: a commit's files never change, so
  this is a hand edit (the pods' check would refuse the real bytes and the replicas crash-loop);
- a new or re-pinned revision that `fabric weights stage` did not resolve from the repo's `main`
  (`ref: main`): any commit of a Hub repo can be named, a pull request's included, and a recipe with
  `trust_remote_code` runs its code in the engine pod. The entry's `accept_ref: REASON` accepts one,
  reviewed like a deployment's `rollout.accept_outage`.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.documents import parse_yaml, validate_document
from llm_fabric.errors import ConfigError, Problem
from llm_fabric.plan.document import WeightsChange
from llm_fabric.site.gitrepo import git, show_file
from llm_fabric.site.weights_lock import LOCK_FILE, MAIN, LockedCheckpoint, WeightsLock


def _files_changed(before: LockedCheckpoint, after: LockedCheckpoint) -> list[str]:
    old = {f.path: (f.size, f.sha256) for f in before.files}
    new = {f.path: (f.size, f.sha256) for f in after.files}
    return sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))


def _change(name: str, before: LockedCheckpoint | None, after: LockedCheckpoint | None) -> WeightsChange | None:
    if before is not None and after is not None:
        files = _files_changed(before, after)
        if not files and before.revision == after.revision:
            return None
    else:  # added or removed: every file of the side that has it
        side = before if before is not None else after
        if side is None:
            return None
        files = sorted(f.path for f in side.files)
    return WeightsChange(
        checkpoint=name,
        change="added" if before is None else "removed" if after is None else "changed",
        revision_before=before.revision if before is not None else None,
        revision_after=after.revision if after is not None else None,
        files_changed=files,
        bytes_before=before.size if before is not None else 0,
        bytes_after=after.size if after is not None else 0,
    )


def diff_locks(base: WeightsLock, new: WeightsLock) -> list[WeightsChange]:
    names = sorted(base.checkpoints.keys() | new.checkpoints.keys())
    changes = (_change(n, base.checkpoints.get(n), new.checkpoints.get(n)) for n in names)
    return [c for c in changes if c is not None]


def _refusal(site_root: Path, name: str, pinned: LockedCheckpoint, why: str, hint: str) -> Problem:
    # the file names weights.lock where the problem is printed (`PATH/weights.lock: CHECKPOINT@REVISION: ...`)
    return Problem(f"{name}@{pinned.revision}: {why}", file=site_root / LOCK_FILE, hint=hint)


def lock_refusals(site_root: Path, base: WeightsLock, new: WeightsLock, base_rev: str) -> list[Problem]:
    """What the change of `weights.lock` against `base_rev` may not do (empty: a reviewable change)."""
    out: list[Problem] = []
    for name, after in sorted(new.checkpoints.items()):
        before = base.checkpoints.get(name)
        if before is not None and before.revision == after.revision:
            files = _files_changed(before, after)
            if files:
                out.append(
                    _refusal(
                        site_root,
                        name,
                        after,
                        f"the same revision pins other files or hashes than {base_rev}'s lock "
                        f"({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}): a commit's files never change",
                        "restore the entry as the base has it; a new revision is pinned by `fabric weights stage`",
                    )
                )
            continue
        if after.ref != MAIN and after.accept_ref is None:
            came = f"ref `{after.ref}`" if after.ref is not None else "no recorded ref"
            out.append(
                _refusal(
                    site_root,
                    name,
                    after,
                    f"the revision was not staged from `{MAIN}` ({came}): it may be any commit of the Hub repo, "
                    "a pull request's included",
                    f"pin it with `fabric weights stage` (it resolves `{MAIN}` and records `ref: {MAIN}`), or set "
                    "`accept_ref: REASON` in its entry to accept this commit in the review",
                )
            )
    return out


def lock_at(site_root: Path, rev: str) -> WeightsLock:
    """The site repo's `weights.lock` at git revision `rev` (empty when it had none, or one that does not load:
    then every entry of the change is judged as new)."""
    top = Path(git(site_root, "rev-parse", "--show-toplevel").strip())
    prefix = git(site_root, "rev-parse", "--show-prefix").strip()
    text = show_file(top, rev, f"{prefix}{LOCK_FILE}")
    if text is None:
        return WeightsLock()
    try:
        return validate_document(parse_yaml(text, site_root / LOCK_FILE), WeightsLock)
    except ConfigError:
        return WeightsLock()
