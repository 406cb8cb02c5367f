"""Retire a node: cordon and drain it with `playbooks/drain.yml`, then mark its manifest retired (re-signed, committed).

The order matters. The signature is checked before the cluster is touched (a hand-edited manifest is
refused, exit 3), and the manifest is marked only once the drain succeeded: a failed drain leaves the
site repo as it was, so placement keeps seeing the node as it really is. The playbook is not asked to
mark the manifest itself (its `fabric_drain_manifest`): that edit would break the signature, and the re-signed
file that `mark_retired` writes under the registry lock says the same thing, signed.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.documents import dump_yaml, load_model, read_yaml
from llm_fabric.enrollment.registry import (
    Registration,
    manifest_text,
    registry_lock,
    retirement_path,
    verified_manifest,
)
from llm_fabric.errors import UsageError
from llm_fabric.nodes.provision import drain_node
from llm_fabric.playbook_runner import PlaybookResult
from llm_fabric.site import gitrepo
from llm_fabric.site.loader import FABRIC_FILE
from llm_fabric.site.models import FabricConfig, NodeManifest, RetirementRecord
from llm_fabric.trust.signatures import sign_manifest

_NO_DRAIN_HINT = "if the machine and its Kubernetes node are already gone, retire it with --no-drain"
# kubectl's --timeout takes a Go duration
_DURATION = re.compile(r"^(\d+(\.\d+)?(ms|s|m|h))+$")


@dataclass(frozen=True)
class DrainOptions:
    """How to reach the node's cluster. `context` defaults to the node's site's `cluster.name` in fabric.yaml."""

    kubectl: str = "kubectl"
    context: str | None = None
    timeout: str = "15m"


@dataclass
class Retirement:
    registration: Registration
    drain: PlaybookResult | None  # None: not drained (--no-drain, or the node was already retired)
    kubectl: str | None = None  # the kubectl command the drain ran with


def retire_node(root: Path, name: str, private: Ed25519PrivateKey, *, drain: DrainOptions | None) -> Retirement:
    """Drain NAME (unless `drain` is None) and mark it retired; nothing is written when the drain fails."""
    root = root.resolve()  # git runs inside root on paths joined onto it
    _, manifest = verified_manifest(root, name, "retire")  # checked before the cluster is touched
    if manifest.status == "retired":
        return Retirement(mark_retired(root, name, private), None)
    result = None
    kubectl = None
    if drain is not None:
        kubectl = kubectl_command(root, manifest, drain)
        result = drain_node(name, manifest=None, status="retired", kubectl=kubectl, timeout=drain.timeout)
        if not result.succeeded:
            raise UsageError(
                f"draining `{name}` failed ({result.status}); its manifest is unchanged:\n  "
                + "\n  ".join(result.failures or ["drain.yml reported no failed task"]),
                hint=_NO_DRAIN_HINT,
            )
    return Retirement(mark_retired(root, name, private), result, kubectl)


def kubectl_command(root: Path, manifest: NodeManifest, options: DrainOptions) -> str:
    """The kubectl command line for the node's cluster, checked to exist before Ansible runs it."""
    if not _DURATION.match(options.timeout):
        raise UsageError(f"--drain-timeout {options.timeout!r} is not a duration", hint="e.g. 90s, 15m or 1h")
    words = shlex.split(options.kubectl)
    if not words:
        raise UsageError("--kubectl is empty", hint="e.g. --kubectl kubectl, or --no-drain")
    if shutil.which(words[0]) is None:
        raise UsageError(
            f"`{words[0]}` was not found: retiring `{manifest.name}` drains it with kubectl",
            hint=f"install kubectl or pass --kubectl PATH; {_NO_DRAIN_HINT}",
        )
    context = options.context or _cluster_context(root, manifest)
    return shlex.join([*words, "--context", context])


def _cluster_context(root: Path, manifest: NodeManifest) -> str:
    path = root / FABRIC_FILE
    config = load_model(path, FabricConfig)
    site = config.sites.get(manifest.site)
    if site is None:
        raise UsageError(
            f"node `{manifest.name}` is at site `{manifest.site}`, which {path} does not define",
            hint="pass the cluster's kubeconfig context with --context",
        )
    return site.cluster.name


def mark_retired(root: Path, name: str, private: Ed25519PrivateKey) -> Registration:
    """Mark a node retired: re-signed manifest and retirement record, committed together.

    Draining its workloads is the drain playbook's job. The manifest is written first and the record
    second; a run killed in between is completed by the next (it finds the node retired, writes what is
    missing and commits), and a run that fails before its commit puts both files back as committed.
    """
    with registry_lock(root):
        path, current = verified_manifest(root, name, "retire")
        record = retirement_path(root, name)
        paths = [path, record]
        changes = []
        with gitrepo.rolled_back_on_error(root, paths):
            if current.status != "retired":
                updated = sign_manifest(current.model_copy(update={"status": "retired"}), private)
                text = manifest_text(updated) if current.provenance == "enrolled" else resigned_text(path, updated)
                write_atomic(path, text)
                changes.append(f"status: {current.status} -> retired")
            if not record.is_file():
                write_atomic(record, _record_text(current))
            commit = gitrepo.commit_paths(root, paths, f"retire {name}")
        return Registration(path, commit, current, changes)


def _record_text(manifest: NodeManifest) -> str:
    record = RetirementRecord(
        name=manifest.name, enrolled_at=manifest.enrolled_at, retired_at=datetime.now(UTC).replace(microsecond=0)
    )
    header = "# Written by `fabric nodes retire`: manifests of this node enrolled before it are refused.\n"
    return header + dump_yaml(record.model_dump(mode="json"))


def resigned_text(path: Path, manifest: NodeManifest) -> str:
    doc = read_yaml(path)
    doc.tree["status"] = manifest.status
    assert manifest.signature is not None
    doc.tree["signature"] = manifest.signature.model_dump(mode="json")
    return dump_yaml(doc.tree)
