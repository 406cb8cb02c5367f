"""`weights.lock` at the site repo's root: which bytes every replica loads, reviewed like any change.

`fabric weights stage` writes it (llm_fabric.weights); `plan --base` shows its diff; a replica's pod
verifies its files against it before the engine starts (engine/runtime/weights_check.py), and the
playbook role that prepares a node's model cache reads the same file. One lock for the federation:
a checkpoint pinned to a revision is the same bytes at every site.

    version: 1
    checkpoints:
      Qwen/Qwen3-8B:                    # the recipe's `checkpoint` (a Hugging Face repo id)
        revision: 0123...cdef           # the repo's commit (40 hex digits), never a branch name
        ref: main                       # the Hub ref it was resolved from by `fabric weights stage`
        files:
          - {path: config.json, size: 1234, sha256: 9f86...}

A revision that did not come from `main` (a pull-request commit, a hand-written one, or an entry
staged before refs were recorded) is refused by `validate --base` and `plan --base` unless the entry
says why it is accepted (`accept_ref: REASON`), as a deployment's `rollout.accept_outage` does: a
recipe with `trust_remote_code` runs that commit's code in the engine pod (review/weights_diff.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from llm_fabric.basemodel import FabricModel

LOCK_FILE = "weights.lock"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
REVISION_PATTERN = r"^[0-9a-f]{40}$"
MAIN = "main"  # the Hub ref a reviewed revision comes from


class LockedFile(FabricModel):
    path: str = Field(min_length=1, max_length=1000, description="relative to the snapshot, `/`-separated")
    size: int = Field(ge=0, description="bytes")
    sha256: str = Field(pattern=SHA256_PATTERN)

    @field_validator("path")
    @classmethod
    def _inside_snapshot(cls, value: str) -> str:
        # the pod's check and the playbook join it under the cache: it must not lead out of it
        if value.startswith("/") or "\\" in value or ".." in value.split("/") or "" in value.split("/"):
            raise ValueError(f"`{value}` is not a relative path inside the snapshot (no `/` first, no `..`)")
        return value


class LockedCheckpoint(FabricModel):
    revision: str = Field(pattern=REVISION_PATTERN, description="the Hugging Face repo's commit")
    ref: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="the Hub ref `fabric weights stage` resolved the revision from (`main`); None: not recorded",
    )
    accept_ref: str | None = Field(
        None,
        min_length=1,
        max_length=500,
        description="why a revision not resolved from `main` is pinned (reviewed like any field); without it "
        "`validate --base` and `plan --base` refuse such an entry when it is new or re-pinned",
    )
    files: list[LockedFile] = Field(min_length=1)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


class WeightsLock(FabricModel):
    version: Literal[1] = 1
    checkpoints: dict[str, LockedCheckpoint] = Field(default_factory=dict, description="repo id -> pinned files")
