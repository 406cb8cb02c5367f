"""Cordon and uncordon a node: its manifest's `status`, re-signed and committed; nothing is drained.

Placement, quotas and capacity count only `active` nodes (`plan.planning`, `deploy.sites`,
`policies.allocation`), so the next plan moves new replicas off a cordoned node; what already runs
there keeps running until the plan is deployed. `status` is signed content, so the change goes
through the enrollment key like every other change of a manifest.

`cordon_on_branch` writes the same signed change onto a review branch (`fabric nodes remediate`),
with the fault as the commit's reason, and leaves the checkout as it is. The reason is the commit's,
not the manifest's: the manifest describes the machine, the history says why its status changed
(`git log nodes/NAME.yaml`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.enrollment.registry import Registration, manifest_text, registry_lock, verified_manifest
from llm_fabric.errors import UsageError
from llm_fabric.nodes.retire import resigned_text
from llm_fabric.site import gitrepo
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import sign_manifest
from llm_fabric.trust.sites import reenroll_command

Status = Literal["active", "cordoned"]


def set_schedulable(root: Path, name: str, private: Ed25519PrivateKey, status: Status) -> Registration:
    """Set NAME's status to `cordoned` or back to `active`; a commit of None means it already was."""
    root = root.resolve()  # git runs inside root on paths joined onto it
    verb = "cordon" if status == "cordoned" else "uncordon"
    with registry_lock(root):
        path, current = verified_manifest(root, name, verb)
        if current.status == "retired":
            raise UsageError(
                f"`{name}` is retired; a retired node is not cordoned or uncordoned",
                hint=f"re-enroll the machine to bring it back: `{reenroll_command(root, current)}`",
            )
        if current.status == status:
            return Registration(path, None, current, [])
        write_atomic(path, _resigned(path, current, status, private))
        commit = gitrepo.commit_paths(root, [path], f"{verb} {name}")
        return Registration(path, commit, current, [f"status: {current.status} -> {status}"])


def cordon_on_branch(root: Path, name: str, private: Ed25519PrivateKey, branch: str, reason: str) -> Registration:
    """Cordon NAME on `branch` (made from HEAD when new), `reason` as the commit message's body.

    Judged against the branch's own tree, so a second run finds the node cordoned there and commits
    nothing (the registration's commit is None); the checkout and its working tree are not touched.
    """
    root = root.resolve()
    with registry_lock(root):
        with gitrepo.branch_tree(root, branch) as judged:
            path, current = verified_manifest(judged, name, "cordon")
            rel = path.relative_to(judged).as_posix()
            if current.status == "retired":
                raise UsageError(f"`{name}` is retired on `{branch}`; a retired node is not cordoned")
            if current.status == "cordoned":
                return Registration(root / rel, None, current, [], branch=branch)
            text = _resigned(path, current, "cordoned", private)
        commit = gitrepo.commit_to_branch(root, branch, {rel: text}, f"cordon {name}: {reason}")
    return Registration(root / rel, commit, current, [f"status: {current.status} -> cordoned"], branch=branch)


def _resigned(path: Path, current: NodeManifest, status: Status, private: Ed25519PrivateKey) -> str:
    """The manifest's text with `status`, signed again; a declared manifest keeps its comments."""
    updated = sign_manifest(current.model_copy(update={"status": status}), private)
    return manifest_text(updated) if current.provenance == "enrolled" else resigned_text(path, updated)
