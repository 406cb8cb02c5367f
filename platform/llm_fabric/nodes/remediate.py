"""`fabric nodes remediate`: a GPU fault becomes a reviewed change of the site repo, never a merge.

Each fault (a firing FabricGpuXid* alert, or a node and Xid named by the operator) is classified with
the distribution's Xid table (`hardware.xids`), whatever alert carried it:

- node-fatal: a signed cordon commit, the fault as its reason, on the branch `remediate/NODE-xidN`
  made from the checked-out branch (the base). The re-plan is the one `fabric plan --base BASE`
  computes on that branch: the cordoned node counts no GPUs, so its replicas are placed elsewhere
  where policy allows, or listed as shortfalls. Nothing is merged; the review decides.
- replica-fatal: what to do (restart the replicas the checkout's plan runs on that GPU), nothing written;
- application: the workload's own fault, counted by the alert, nothing written, nobody paged;
- an Xid the table does not list: named, nothing written (the table is to be completed).

What Prometheus says is input, not proof: a fault from an alert is acted on (whatever its class) only
when its node's manifest at the base is signed by a trusted key and lists each reporting GPU's UUID (at
the alert's GPU index, when it names one); otherwise it is reported and skipped. One fault that cannot
be acted on (an unknown node or GPU, a refused manifest) never stops the others of the same poll.
The signing key is the one the operator gives (`--key`), never found by itself.

A second run for a fault already handled writes nothing: the node is cordoned on the base, or on a
`remediate/NODE-*` branch already waiting for review. The checkout is never written to (git's
plumbing builds the branch), and a checkout with uncommitted changes is refused first: the branch is
made from commits, and the review of it must be what the operator sees.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.documents import parse_yaml, validate_document
from llm_fabric.errors import ConfigError, PolicyRefusal, UsageError
from llm_fabric.hardware.xids import XidKind, XidTable, load_xid_table
from llm_fabric.kube.labels import REPLICA
from llm_fabric.nodes.cordon import cordon_on_branch
from llm_fabric.nodes.xid_alerts import FiringXid
from llm_fabric.plan.document import ReplicaPlacement
from llm_fabric.review.base import plan_repo
from llm_fabric.serving.workloads import replica_name
from llm_fabric.site import gitrepo
from llm_fabric.site.models import NodeManifest
from llm_fabric.site.paths import check_name
from llm_fabric.trust.signatures import load_public_keys, verify_manifest
from llm_fabric.trust.sites import Keys

BRANCH_PREFIX = "remediate/"
Outcome = Literal[
    "cordoned",
    "pending",
    "already-cordoned",
    "restart",
    "counted",
    "unclassified",
    "unknown-node",
    "refused",  # the fault could not be acted on (its manifest's signature, a git error): skipped, the others go on
]


@dataclass(frozen=True)
class Fault:
    """One Xid on one node, with the GPUs that report it."""

    node: str
    xid: int
    gpus: tuple[str, ...]
    source: str  # the alert that carried it, or "named by the operator"
    gpu_indices: tuple[int, ...] = ()  # empty: the GPUs are not known (a fault named by the operator)

    @property
    def branch(self) -> str:
        return f"{BRANCH_PREFIX}{self.node}-xid{self.xid}"


@dataclass(frozen=True)
class Remedy:
    fault: Fault
    kind: XidKind | None  # None: an Xid the table does not list
    outcome: Outcome
    message: str
    branch: str | None = None  # the review branch holding the cordon (new or already there)
    commit: str | None = None  # the commit this run wrote; None when it wrote nothing

    @property
    def wrote(self) -> bool:
        return self.commit is not None


def faults_from_alerts(root: Path, firing: Sequence[FiringXid]) -> tuple[list[Fault], list[str]]:
    """One fault per node and Xid of the alerts the signed manifests vouch for (several GPUs of a node
    reporting the same Xid are one fault), and why each other alert is skipped."""
    root = root.resolve()
    base = base_branch(root)
    keys = load_public_keys(root)
    manifests: dict[str, NodeManifest | str | None] = {}
    grouped: dict[tuple[str, int], list[FiringXid]] = {}
    skipped = []
    for f in firing:
        if f.node not in manifests:
            manifests[f.node] = _trusted_manifest(root, base, f.node, keys)
        problem = _unmatched(f, manifests[f.node], base)
        if problem is None:
            grouped.setdefault((f.node, f.xid), []).append(f)
        else:
            skipped.append(f"skipped alert {f.alert} (Xid {f.xid} on {f.node}, {f.gpu}): {problem}; nothing done")
    faults = [
        Fault(
            node,
            xid,
            tuple(f.gpu for f in group),
            ", ".join(sorted({f.alert for f in group})),
            tuple(sorted({f.index for f in group if f.index is not None})),
        )
        for (node, xid), group in sorted(grouped.items())
    ]
    return faults, skipped


def _trusted_manifest(root: Path, base: str, node: str, keys: Keys) -> NodeManifest | str | None:
    """NODE's manifest on `base` when a trusted key signed it; why not, in words; None: no such node."""
    try:
        manifest = _manifest_at(root, base, node)
    except ConfigError as exc:
        return f"nodes/{node}.yaml on {base} does not load ({exc.message})"
    if manifest is None:
        return None
    problem = verify_manifest(manifest, dict(keys))
    return manifest if problem is None else f"the manifest of `{node}` on {base} is not trusted ({problem})"


def _unmatched(alert: FiringXid, manifest: NodeManifest | str | None, base: str) -> str | None:
    """Why ALERT names no GPU of the fabric (None: it does).

    Prometheus, or anything that can write its alerts, names nodes and GPUs; only the site repo's
    signed manifests say which GPUs are the fabric's, so a UUID they do not list is no GPU of ours.
    """
    if manifest is None:
        return f"`{alert.node}` is no node of this site repo (nodes/ on {base})"
    if isinstance(manifest, str):
        return manifest
    uuids = manifest.gpus.uuids
    if alert.uuid is None or alert.uuid not in uuids:
        said = f"UUID {alert.uuid}" if alert.uuid else "no UUID"
        return f"the alert names {said}, which the signed manifest of `{alert.node}` does not list"
    if alert.index is not None and (alert.index >= len(uuids) or uuids[alert.index] != alert.uuid):
        return f"the alert puts {alert.uuid} at GPU {alert.index}, where the signed manifest of `{alert.node}` does not"
    return None


def named_fault(node: str, xid: int) -> Fault:
    return Fault(check_name(node, "node name"), xid, (), "named by the operator (--node/--xid)")


def base_branch(root: Path) -> str:
    """The checked-out branch: review branches start there and are judged against it."""
    name = gitrepo.git(root, "symbolic-ref", "-q", "--short", "HEAD", check=False).strip()
    if not name:
        raise UsageError(
            f"{root} has no branch checked out (detached HEAD): a review branch needs a base to be merged into",
            hint=f"check out the site repo's main branch first (git -C {root} switch main)",
        )
    return name


def remediate(
    root: Path, faults: Sequence[Fault], private: Ed25519PrivateKey, *, table: XidTable | None = None
) -> list[Remedy]:
    """Act on each fault in turn (see the module's docstring); UsageError over an uncommitted checkout."""
    root = root.resolve()
    base = base_branch(root)
    gitrepo.require_committed(root, [], "`fabric nodes remediate`")
    table = table or load_xid_table()
    replicas: list[ReplicaPlacement] | None = None
    out = []
    for fault in faults:
        if table.classify(fault.xid) == "replica-fatal" and replicas is None:
            replicas = plan_repo(root).plan.replicas  # which replica runs on the GPU: the checkout's plan
        try:
            out.append(_remedy(root, base, fault, private, table, replicas or []))
        except (UsageError, PolicyRefusal) as exc:  # this fault's own refusal; the next fault is still acted on
            out.append(
                Remedy(
                    fault,
                    table.classify(fault.xid),
                    "refused",
                    f"Xid {fault.xid}{_where(fault)}: refused: {exc.message}; nothing written",
                )
            )
    return out


def _remedy(
    root: Path,
    base: str,
    fault: Fault,
    private: Ed25519PrivateKey,
    table: XidTable,
    replicas: Sequence[ReplicaPlacement],
) -> Remedy:
    kind = table.classify(fault.xid)
    where = _where(fault)
    meaning = next((x.meaning for x in table.xids if x.xid == fault.xid), "")
    if kind is None:
        return Remedy(
            fault,
            None,
            "unclassified",
            f"Xid {fault.xid}{where} is not in the Xid table: nothing written; look it up in {table.source} "
            "and add it to enrollment/xid-classes.yaml",
        )
    if kind == "application":
        return Remedy(
            fault,
            kind,
            "counted",
            f"application Xid {fault.xid} ({meaning}){where}: the workload's own fault, counted, pages nobody; "
            "nothing written",
        )
    if kind == "replica-fatal":
        return Remedy(
            fault,
            kind,
            "restart",
            f"replica-fatal Xid {fault.xid} ({meaning}){where}: {_restart(fault, replicas)}; "
            "no cordon, nothing written",
        )
    status = _status_at(root, base, fault.node)
    if status is None:
        return Remedy(
            fault,
            kind,
            "unknown-node",
            f"node-fatal Xid {fault.xid}{where}: `{fault.node}` is no node of this site repo (nodes/ on {base}); "
            "nothing written",
        )
    if status != "active":
        return Remedy(
            fault,
            kind,
            "already-cordoned",
            f"node-fatal Xid {fault.xid}{where}: `{fault.node}` is already {status} on {base}; nothing changed",
        )
    pending = _pending_branch(root, fault.node)
    if pending is not None and pending != fault.branch:
        return Remedy(
            fault,
            kind,
            "pending",
            f"node-fatal Xid {fault.xid}{where}: `{fault.node}` is already cordoned on the review branch {pending}; "
            "nothing changed",
            branch=pending,
        )
    reg = cordon_on_branch(root, fault.node, private, fault.branch, _reason(fault, meaning, base))
    if reg.commit is None:
        return Remedy(
            fault,
            kind,
            "pending",
            f"node-fatal Xid {fault.xid}{where}: the cordon is already on the review branch {fault.branch}; "
            "nothing changed",
            branch=fault.branch,
        )
    return Remedy(
        fault,
        kind,
        "cordoned",
        f"node-fatal Xid {fault.xid} ({meaning}){where}: cordoned `{fault.node}` on branch {fault.branch} "
        f"(commit {reg.commit}); review and merge it into {base}",
        branch=fault.branch,
        commit=reg.commit,
    )


def _restart(fault: Fault, replicas: Sequence[ReplicaPlacement]) -> str:
    """What to restart: the planned replicas on the fault's GPUs (all of the node's when they are not known)."""
    hit = [
        r
        for r in replicas
        if r.node == fault.node and (not fault.gpu_indices or set(r.gpu_indices) & set(fault.gpu_indices))
    ]
    if not hit:
        return f"the plan runs no replica on it; restart whatever uses it on {fault.node}"
    names = ", ".join(f"{r.deployment}/{r.index}" for r in hit)
    selector = (
        f"{REPLICA}={replica_name(hit[0])}" if len(hit) == 1 else f"{REPLICA} in ({','.join(map(replica_name, hit))})"
    )
    return f"restart {names} (kubectl delete pod --all-namespaces -l '{selector}')"


def _where(fault: Fault) -> str:
    gpus = f" ({', '.join(fault.gpus)})" if fault.gpus else ""
    return f" on {fault.node}{gpus}"


def _reason(fault: Fault, meaning: str, base: str) -> str:
    gpus = ", ".join(fault.gpus) or "the GPUs of the node (named by the operator)"
    return (
        f"node-fatal Xid {fault.xid} ({meaning})\n\n"
        f"Reported by: {gpus}; source: {fault.source}.\n"
        "The next plan counts none of this node's GPUs, so its replicas are placed elsewhere where policy\n"
        f"allows: review `fabric plan --base {base}` on this branch before merging.\n"
        f"Written by `fabric nodes remediate`; after the repair, uncordoning is a reviewed change too:\n"
        f"`fabric nodes uncordon {fault.node}` on a branch, merged after review.\n"
    )


def _manifest_at(root: Path, rev: str, node: str) -> NodeManifest | None:
    """NODE's manifest at `rev` (None: no such manifest); ConfigError when it does not load."""
    text = gitrepo.show_file(root, rev, f"./nodes/{node}.yaml")
    if text is None:
        return None
    return validate_document(parse_yaml(text, Path(f"{rev}:nodes/{node}.yaml")), NodeManifest)


def _status_at(root: Path, rev: str, node: str) -> str | None:
    """NODE's `status` in the manifest at `rev` (None: no such manifest); signatures are the cordon's to judge."""
    text = gitrepo.show_file(root, rev, f"./nodes/{node}.yaml")  # ./: relative to the site root inside a larger repo
    if text is None:
        return None
    try:
        tree = parse_yaml(text, Path(f"{rev}:nodes/{node}.yaml")).tree
    except ConfigError:
        return "active"  # a manifest that does not parse is refused, with its line, by the cordon itself
    status = tree.get("status", "active") if isinstance(tree, dict) else "active"
    return str(status)


def _pending_branch(root: Path, node: str) -> str | None:
    """A `remediate/NODE-xid*` branch on which NODE is already cordoned (a fault of this node being reviewed)."""
    refs = gitrepo.git(root, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{BRANCH_PREFIX}{node}-xid*")
    for branch in refs.split():
        if _status_at(root, branch, node) == "cordoned":
            return branch
    return None


@contextmanager
def branch_checkout(root: Path, branch: str) -> Iterator[Path]:
    """A detached git worktree of `branch` in a temporary folder (removed afterwards): the site repo as
    the review branch has it, a real repository, so `fabric plan --base` and `validate --base` judge it
    as CI would; the operator's checkout is not touched."""
    top = Path(gitrepo.git(root, "rev-parse", "--show-toplevel").strip())
    prefix = gitrepo.git(root, "rev-parse", "--show-prefix").strip()
    with tempfile.TemporaryDirectory(prefix="fabric-review-") as tmp:
        tree = Path(tmp) / "tree"
        gitrepo.git(top, "worktree", "add", "-q", "--detach", str(tree), branch)
        try:
            yield tree / prefix
        finally:
            gitrepo.git(top, "worktree", "remove", "--force", str(tree), check=False)
            gitrepo.git(top, "worktree", "prune", check=False)
