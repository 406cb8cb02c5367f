"""Node manifests in the site repo: write (atomic, then a git commit), compare, verify.

Registration holds `.git/fabric-enroll.lock` from the GPU-UUID check to the commit, so that two
enrolments into one repo at the same time cannot both claim a GPU and neither loses its commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.documents import dump_yaml, load_model, read_yaml, validate_document
from llm_fabric.errors import ConfigError, PolicyRefusal, Problem, UsageError
from llm_fabric.site import gitrepo
from llm_fabric.site.models import NodeManifest
from llm_fabric.site.paths import RETIRED, check_name, repo_path, unsafe_entry
from llm_fabric.site.root import require_site_root
from llm_fabric.site.schemas import modeline
from llm_fabric.trust.signatures import KEYS_DIR, load_public_keys, sign_manifest, verify_manifest

NODES = "nodes"
# facts that change on every enrolment and say nothing about the machine
_VOLATILE = ("enrolled_at", "signature", "checks")


def node_path(root: Path, name: str) -> Path:
    """nodes/NAME.yaml; a NAME that is no DNS label, or a nodes/ that leads out of the repo, is a UsageError."""
    return repo_path(root, NODES, f"{check_name(name, 'node name')}.yaml")


def retirement_path(root: Path, name: str) -> Path:
    """retired/NAME.yaml, the record `fabric nodes retire` leaves (llm_fabric.site.models.RetirementRecord)."""
    return repo_path(root, RETIRED, f"{check_name(name, 'node name')}.yaml")


def manifest_text(manifest: NodeManifest) -> str:
    body = dump_yaml(manifest.model_dump(mode="json", exclude_none=True))
    header = (
        f"{modeline(Path(NODES) / (manifest.name + '.yaml'))}\n"
        "# Written by `fabric enroll`; signed: edit it by re-enrolling, never by hand.\n"
    )
    return header + body


@contextmanager
def registry_lock(root: Path) -> Iterator[None]:
    if not gitrepo.is_repo(root):
        raise UsageError(f"{root} is not a git site repo", hint="create one with `fabric init DIR`")
    with gitrepo.write_lock(root, (NODES, RETIRED, KEYS_DIR)):
        yield


def load_nodes(root: Path) -> dict[str, NodeManifest]:
    """Every loadable manifest in nodes/ (files that do not load are left to `fabric validate`)."""
    out = {}
    for path in sorted((root / NODES).glob("*.yaml")):
        try:
            out[path.stem] = load_model(path, NodeManifest)
        except ConfigError:
            continue
    return out


@dataclass
class Registration:
    path: Path
    commit: str | None
    previous: NodeManifest | None
    changes: list[str] = field(default_factory=list)
    branch: str | None = None  # the branch the commit went to, when not the checkout's


def register(
    root: Path, manifest: NodeManifest, private: Ed25519PrivateKey, *, branch: str | None = None
) -> Registration:
    """Sign and commit the manifest; with `branch`, commit it onto that branch and leave the checkout as it is.

    A branch is checked against the nodes of the checkout (what has landed), like a direct enrolment;
    the branch checked out is the checkout.
    """
    if gitrepo.is_checked_out(root, branch):
        branch = None
    with registry_lock(root):
        nodes = load_nodes(root)
        refuse_claimed_gpus(manifest, nodes)
        previous = nodes.get(manifest.name)
        if previous is not None and previous.status == "cordoned":
            # re-enrolling refreshes the facts; lifting a cordon is `fabric nodes uncordon`'s job
            manifest = manifest.model_copy(update={"status": "cordoned"})
        signed = sign_manifest(manifest, private)
        path = node_path(root, manifest.name)
        changes = describe_changes(previous, signed) if previous is not None else []
        verb = "re-enroll" if previous is not None else "enroll"
        g = signed.gpus
        message = f"{verb} {signed.name}: {signed.tier} tier, {g.count}x {g.catalog_id} ({signed.owner}@{signed.site})"
        if changes:
            message += "\n\n" + "\n".join(f"- {c}" for c in changes)
        if branch is not None:
            rel = path.relative_to(root).as_posix()
            commit = gitrepo.commit_to_branch(root, branch, {rel: manifest_text(signed)}, message)
            return Registration(path, commit, previous, changes, branch=branch)
        write_atomic(path, manifest_text(signed), mode=0o644)
        commit = gitrepo.commit_paths(root, [path], message)
        return Registration(path, commit, previous, changes)


def refuse_claimed_gpus(manifest: NodeManifest, nodes: dict[str, NodeManifest]) -> None:
    """PolicyRefusal (exit 3) when a GPU of `manifest` is registered under another node that is not retired."""
    mine = set(manifest.gpus.uuids)
    for name, node in nodes.items():
        if name == manifest.name or node.status == "retired":
            continue
        shared = sorted(mine & set(node.gpus.uuids))
        if shared:
            raise PolicyRefusal(
                f"refused: {len(shared)} of these GPUs are already registered under node `{name}`",
                problems=[
                    Problem(f"GPU {u} belongs to `{name}`", file=Path(NODES) / f"{name}.yaml") for u in shared[:4]
                ],
                hint=f"re-enroll with --name {name} if this is that machine, or `fabric nodes retire {name}` first",
            )


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def describe_changes(old: NodeManifest, new: NodeManifest) -> list[str]:
    """What re-enrolling changed, in words; a swapped GPU shows as a removed and an added UUID."""
    before = _flatten(old.model_dump(mode="json", exclude=set(_VOLATILE)))
    after = _flatten(new.model_dump(mode="json", exclude=set(_VOLATILE)))
    changes = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if key == "gpus.uuids":
            removed, added = sorted(set(a or []) - set(b or [])), sorted(set(b or []) - set(a or []))
            if removed:
                changes.append(f"GPU removed: {', '.join(removed)}")
            if added:
                changes.append(f"GPU added: {', '.join(added)}")
            continue
        changes.append(f"{key}: {a} -> {b}")
    return changes


def sign_file(path: Path, private: Ed25519PrivateKey) -> NodeManifest:
    """Sign a manifest written by an operator, keeping its comments and layout."""
    doc = read_yaml(path)
    manifest = validate_document(doc, NodeManifest)
    signed = sign_manifest(manifest, private)
    assert signed.signature is not None
    doc.tree["signature"] = signed.signature.model_dump(mode="json")
    write_atomic(path, dump_yaml(doc.tree), mode=0o644)
    return signed


def sign_declared(root: Path, name: str, private: Ed25519PrivateKey) -> Registration:
    """Sign the hand-written (provenance: declared) manifest of NAME and commit it when ROOT is a git repo.

    Enrolled manifests are refused: their facts come from the machine, so vouching for an edit by hand
    would sign what no one measured; re-enrolling is the way to change them.
    """
    path = node_path(root, name)
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in path.parent.glob("*.yaml"))) or "none"
        raise UsageError(f"no node `{name}` in {path.parent}", hint=f"known nodes: {known}")
    previous = load_model(path, NodeManifest)
    if previous.provenance != "declared":
        raise UsageError(f"`{name}` was enrolled, not declared", hint="re-enroll it instead of signing by hand")
    sign_file(path, private)
    commit = gitrepo.commit_paths(root, [path], f"sign declared node {name}") if gitrepo.is_repo(root) else None
    return Registration(path, commit, previous, [])


def verified_manifest(root: Path, name: str, action: str) -> tuple[Path, NodeManifest]:
    """NAME's path and manifest, for a change (`action`: "retire", "cordon", ...) made under `registry_lock`.

    UsageError when there is no such node; PolicyRefusal (exit 3) when its signature does not hold:
    re-signing an edited manifest would vouch for the edit.
    """
    path = node_path(root, name)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (root / NODES).glob("*.yaml"))) or "none"
        raise UsageError(f"no node `{name}` in {root / NODES}", hint=f"known nodes: {known}")
    current = load_model(path, NodeManifest)
    problem = verify_manifest(current, load_public_keys(root))
    if problem is not None:
        raise PolicyRefusal(f"refused to {action} `{name}`: {problem}", hint=f"run `fabric nodes verify -C {root}`")
    return path, current


@dataclass
class NodeStatus:
    name: str
    path: Path
    manifest: NodeManifest | None
    problem: str | None
    load_problems: tuple[Problem, ...] = ()  # why the manifest does not load, each with its file and line
    hint: str | None = None  # how to fix a failing signature (the one `fabric validate` gives)


def verify_nodes(root: Path) -> list[NodeStatus]:
    from llm_fabric.trust.sites import signature_hint  # it loads the site loader, which `fabric init --help` must not

    require_site_root(root)  # outside a site repo an empty nodes/ is a mistake, not an empty fleet
    keys = load_public_keys(root)
    out = []
    for path in sorted((root / NODES).glob("*.yaml")):
        unsafe = unsafe_entry(path)
        if unsafe is not None:  # a link is not the repo's content, whatever it points at
            out.append(NodeStatus(path.stem, path, None, unsafe.message))
            continue
        try:
            manifest = load_model(path, NodeManifest)
        except ConfigError as exc:
            problems = tuple(exc.problems)
            out.append(NodeStatus(path.stem, path, None, "; ".join(str(p) for p in problems), problems))
            continue
        problem = verify_manifest(manifest, keys)
        hint = signature_hint(root, manifest, keys) if problem is not None else None
        out.append(NodeStatus(path.stem, path, manifest, problem, hint=hint))
    return out
