"""The checkpoints a plan needs downloaded into a node's model cache, then pinned in `weights.lock`.

huggingface_hub downloads each checkpoint into CACHE/hf/hub (the pods' HF_HOME) from the Hub or the
mirror `endpoint` (HF_ENDPOINT: a site without internet access), at one commit: the lock's revision
where the checkpoint is pinned, else the commit `main` names on the mirror, resolved once. A pinned
checkpoint whose files already match the lock is not asked for at all (staging the same lock twice
downloads nothing). `refs/main` is set to that commit, because the engines open the repo offline
without a revision. The lock is then written from the files on disk (pin.pin_checkpoints), a new entry
with `ref: main`: the review refuses a revision that did not come from `main` (review/weights_diff.py).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx2
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from llm_fabric.atomicio import write_atomic
from llm_fabric.engine.runtime.weights_check import Locked, check, repo_folder
from llm_fabric.errors import UsageError
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.weights_lock import MAIN
from llm_fabric.weights.pin import PinResult, pin_checkpoints


@dataclass(frozen=True)
class Staged:
    checkpoint: str
    revision: str
    action: Literal["downloaded", "reused"]


def _endpoint_hint(endpoint: str | None) -> str:
    where = f"HF_ENDPOINT={endpoint}" if endpoint else "the Hugging Face Hub (no HF_ENDPOINT set)"
    return f"is it on {where}? a private or gated repo needs HF_TOKEN"


def _hub_call_error(checkpoint: str, endpoint: str | None, exc: Exception) -> UsageError:
    if isinstance(exc, GatedRepoError):
        return UsageError(
            f"`{checkpoint}` is gated: the token has no access", hint="set HF_TOKEN to a token with access"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return UsageError(f"checkpoint `{checkpoint}` is not on the mirror", hint=_endpoint_hint(endpoint))
    if isinstance(exc, RevisionNotFoundError):
        return UsageError(
            f"`{checkpoint}`: the pinned revision is not on the mirror",
            hint="mirror that commit, or remove the checkpoint from weights.lock to pin the current one (reviewed)",
        )
    if isinstance(exc, OfflineModeIsEnabled):
        return UsageError(
            f"cannot download `{checkpoint}`: HF_HUB_OFFLINE is set", hint="unset HF_HUB_OFFLINE to stage"
        )
    if isinstance(exc, httpx2.TransportError | LocalEntryNotFoundError):
        return UsageError(
            f"cannot download `{checkpoint}`: {exc}",
            hint=f"is {endpoint or 'huggingface.co'} reachable from here? set HF_ENDPOINT to the site's mirror",
        )
    return UsageError(f"downloading `{checkpoint}` failed: {exc}", hint=_endpoint_hint(endpoint))


def _in_place(site: SiteRepo, hf_home: Path, checkpoint: str) -> bool:
    pinned = site.weights_lock.checkpoints.get(checkpoint)
    if pinned is None:
        return False
    files = [Locked(f.path, f.size, f.sha256) for f in pinned.files]
    return not check(hf_home, checkpoint, pinned.revision, files)


def _download(hf_home: Path, checkpoint: str, revision: str | None, endpoint: str | None, token: str | None) -> str:
    """The checkpoint at `revision` (None: what `main` names now) in the cache; its commit."""
    try:
        if revision is None:
            revision = HfApi(endpoint=endpoint, token=token).model_info(checkpoint, revision=MAIN).sha
            if revision is None:
                raise UsageError(f"the mirror names no commit for `{checkpoint}`", hint=_endpoint_hint(endpoint))
        snapshot_download(checkpoint, revision=revision, cache_dir=hf_home / "hub", endpoint=endpoint, token=token)
    except (HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled, httpx2.TransportError) as exc:
        raise _hub_call_error(checkpoint, endpoint, exc) from exc
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise UsageError(
                f"the model cache {hf_home} is full while downloading `{checkpoint}`",
                hint="free space on the node's model cache disk (or stage fewer checkpoints: --site), then stage again",
            ) from exc
        raise UsageError(
            f"cannot write `{checkpoint}` into {hf_home}: {exc.strerror}", hint="check the folder's permissions"
        ) from exc
    refs = repo_folder(hf_home, checkpoint) / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    write_atomic(refs / "main", revision)
    return revision


def stage_checkpoints(
    site: SiteRepo, hf_home: Path, checkpoints: list[str], *, endpoint: str | None = None, token: str | None = None
) -> tuple[list[Staged], PinResult]:
    staged: list[Staged] = []
    refs: dict[str, str] = {}
    for name in checkpoints:
        if _in_place(site, hf_home, name):
            staged.append(Staged(name, site.weights_lock.checkpoints[name].revision, "reused"))
            continue
        pinned = site.weights_lock.checkpoints.get(name)
        revision = _download(hf_home, name, pinned.revision if pinned else None, endpoint, token)
        if pinned is None:
            refs[name] = MAIN  # _download resolved it from what `main` names on the mirror
        staged.append(Staged(name, revision, "downloaded"))
    return staged, pin_checkpoints(site, hf_home, checkpoints, refs)
