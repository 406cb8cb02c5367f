"""Rotating the federation's enrollment key: two reviewed changes, so that no node is ever unverifiable.

1. `rotate`: a new key pair; its public key goes into keys/ beside the old one, endorsed by the old
   key (llm_fabric.trust.root: what `validate --base` accepts), and every node manifest is re-signed with
   it, in one commit (or onto a review branch). The old key stays in keys/,
   so the repo verifies before the change, with it, and after it has landed.
2. `retire`, once the rotation has landed: the old key leaves keys/ (kept in keys/retired/ for
   reports signed before, which `fabric report verify --public-key` checks); refused while any
   manifest is still signed by it.

A manifest that does not verify now is never re-signed (that would vouch for an edit): the rotation
is refused, naming it, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.documents import load_model
from llm_fabric.enrollment.registry import NODES, manifest_text, registry_lock
from llm_fabric.errors import PolicyRefusal, Problem, UsageError
from llm_fabric.nodes.retire import resigned_text
from llm_fabric.site import gitrepo
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import (
    ENDORSEMENT_SUFFIX,
    KEYS_DIR,
    endorse_key,
    key_id,
    load_public_keys,
    sign_manifest,
    verify_manifest,
)

RETIRED_KEYS = "retired"  # keys/retired/: public keys no longer trusted, kept for old reports


@dataclass(frozen=True)
class Rotation:
    old_key_id: str
    new_key_id: str
    private_path: Path
    public_path: Path
    resigned: list[str]
    commit: str | None
    branch: str | None


@dataclass(frozen=True)
class KeyRetirement:
    key_id: str
    kept_at: Path
    commit: str | None


def _pem(private: Ed25519PrivateKey) -> tuple[bytes, bytes]:
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


def rotate_key(
    root: Path, old: Ed25519PrivateKey, new_private_path: Path | None = None, *, branch: str | None = None
) -> Rotation:
    root = root.resolve()
    old_id = key_id(old.public_key())
    if old_id not in load_public_keys(root):
        raise UsageError(
            f"the key given (id {old_id}) is not a federation key of {root}",
            hint="pass the private key whose public key is in keys/ with --key",
        )
    new = Ed25519PrivateKey.generate()
    new_id = key_id(new.public_key())
    private_path = new_private_path or root.parent / f"{root.name}.enrollment-{new_id}.key"
    if private_path.exists():
        raise UsageError(f"{private_path} already exists", hint="give another --new-private-key path")
    if private_path.resolve().is_relative_to(root):
        raise UsageError(f"{private_path} is inside the site repo", hint="keep the private key outside the repo")
    public_rel = f"{KEYS_DIR}/enrollment-{new_id}.pub"
    with registry_lock(root):
        # the old key endorses the new one: `validate --base` trusts a key the base revision's keys vouched for
        files = {
            public_rel: _pem(new)[1].decode("ascii"),
            public_rel + ENDORSEMENT_SUFFIX: endorse_key(new.public_key(), old),
        } | _resigned_manifests(root, new)
        write_atomic(private_path, _pem(new)[0], mode=0o600)
        resigned = sorted(Path(rel).stem for rel in files if rel.startswith(f"{NODES}/"))
        message = f"rotate the federation key {old_id} -> {new_id}: add it (endorsed), re-sign {len(resigned)} node(s)"
        if branch is not None:
            commit = gitrepo.commit_to_branch(root, branch, files, message)
        else:
            for rel, text in files.items():
                write_atomic(root / rel, text, mode=0o644)
            commit = gitrepo.commit_paths(root, [root / rel for rel in files], message)
    return Rotation(old_id, new_id, private_path, root / public_rel, resigned, commit, branch)


def _resigned_manifests(root: Path, new: Ed25519PrivateKey) -> dict[str, str]:
    """Every node manifest re-signed by `new` (repo-relative path -> text); refused if any does not verify now."""
    keys = load_public_keys(root)
    out: dict[str, str] = {}
    problems = []
    for path in sorted((root / NODES).glob("*.yaml")):
        manifest = load_model(path, NodeManifest)
        problem = verify_manifest(manifest, keys)
        if problem is not None:
            problems.append(Problem(problem, file=path))
            continue
        signed = sign_manifest(manifest, new)
        text = manifest_text(signed) if manifest.provenance == "enrolled" else resigned_text(path, signed)
        out[path.relative_to(root).as_posix()] = text
    if problems:
        raise PolicyRefusal(
            f"refused to rotate: {len(problems)} node manifest(s) do not verify, and re-signing would vouch for them",
            problems=problems,
            hint="fix them first (`fabric nodes verify` names the command for each), then rotate",
        )
    return out


def retire_key(root: Path, retired_id: str) -> KeyRetirement:
    """Take key `retired_id` (an id, or a file name in keys/) out of keys/: a commit on the checkout."""
    root = root.resolve()
    with registry_lock(root):
        files = {key_id(k): p for p, k in _key_files(root).items()}
        by_name = {p.name: i for i, p in files.items()}
        retired_id = by_name.get(retired_id, retired_id)  # a file name of keys/ names its key too
        if retired_id not in files:
            raise UsageError(
                f"no key {retired_id} in {root / KEYS_DIR}", hint=f"keys: {', '.join(sorted(files)) or 'none'}"
            )
        if len(files) == 1:
            raise UsageError(
                f"{retired_id} is the federation's only key", hint=f"rotate it first: `fabric keys rotate -C {root}`"
            )
        still = sorted(
            p.stem
            for p in (root / NODES).glob("*.yaml")
            if (m := load_model(p, NodeManifest)).signature is not None and m.signature.key_id == retired_id
        )
        if still:
            raise PolicyRefusal(
                f"refused: {len(still)} node(s) are still signed by key {retired_id}: {', '.join(still)}",
                hint="has the rotation landed? (`fabric keys rotate` re-signs every node)",
            )
        path = files[retired_id]
        kept = root / KEYS_DIR / RETIRED_KEYS / f"{retired_id}.pub"
        gone = [path, *([e] if (e := path.with_name(path.name + ".endorsement")).exists() else [])]
        message = f"retire the federation key {retired_id} (kept in {kept.relative_to(root)} for old reports)"
        kept.parent.mkdir(exist_ok=True)
        write_atomic(kept, path.read_bytes(), mode=0o644)
        for file in gone:
            file.unlink()
        commit = gitrepo.commit_paths(root, [*gone, kept], message)
    return KeyRetirement(retired_id, kept, commit)


def _key_files(root: Path) -> dict[Path, Ed25519PublicKey]:
    out: dict[Path, Ed25519PublicKey] = {}
    for path in sorted((root / KEYS_DIR).glob("*.pub")):
        key = serialization.load_pem_public_key(path.read_bytes())
        if isinstance(key, Ed25519PublicKey):
            out[path] = key
    return out
