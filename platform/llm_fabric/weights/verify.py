"""A model cache checked against `weights.lock` on the operator's side: the pod's own check
(engine/runtime/weights_check), so what passes here passes in the init container."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llm_fabric.engine.runtime.weights_check import RESTAGE, Locked, check
from llm_fabric.errors import ConfigError, Problem, UsageError
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.weights_lock import LOCK_FILE


@dataclass(frozen=True)
class Verified:
    checkpoint: str
    revision: str
    files: int
    size: int


def verify_cache(site: SiteRepo, hf_home: Path, checkpoints: list[str] | None = None) -> list[Verified]:
    """Every locked checkpoint (or the named ones) in the cache at `hf_home`; ConfigError lists every mismatch."""
    lock = site.weights_lock
    if not lock.checkpoints:
        raise UsageError(
            f"{site.root / LOCK_FILE} pins no checkpoint: nothing to verify", hint="`fabric weights lock` writes it"
        )
    names = checkpoints or sorted(lock.checkpoints)
    unknown = [n for n in names if n not in lock.checkpoints]
    if unknown:
        raise UsageError(
            f"{site.root / LOCK_FILE} does not pin {', '.join(unknown)}",
            hint=f"it pins: {', '.join(sorted(lock.checkpoints))}",
        )
    problems: list[Problem] = []
    verified: list[Verified] = []
    for name in names:
        pinned = lock.checkpoints[name]
        files = [Locked(f.path, f.size, f.sha256) for f in pinned.files]
        found = check(hf_home, name, pinned.revision, files)
        problems += [Problem(line, hint=RESTAGE) for line in found]
        if not found:
            verified.append(Verified(name, pinned.revision, len(files), pinned.size))
    if problems:
        raise ConfigError(problems, summary=f"the model cache {hf_home} does not match {site.root / LOCK_FILE}")
    return verified
