"""What the fabric trusts: which keys judge a change, and which node manifests may be used.

The trust root for judging a change is the base revision's `keys/` (docs/security.md). A change that
adds or replaces a key file is refused unless an already-trusted key endorsed the new key
(`keys/NAME.pub.endorsement`, written by `fabric keys add`); every key change is listed either way.
A change may not delete a retirement record, nor bring back a retired node's older manifest.

Which node manifests may be used is `trust.sites` (the `TrustedSite` gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.documents import load_model, parse_yaml, validate_document
from llm_fabric.errors import ConfigError, PolicyRefusal, Problem, UsageError
from llm_fabric.site import gitrepo
from llm_fabric.site.models import NodeManifest
from llm_fabric.site.paths import RETIRED, check_name, repo_path
from llm_fabric.trust.signatures import (
    ENDORSEMENT_SUFFIX,
    KEYS_DIR,
    RELAY_KEYS_DIR,
    endorse_key,
    endorsement_signer,
    key_id,
    load_public_key,
    load_public_keys,
    parse_public_key,
    public_key_files,
)


@dataclass(frozen=True)
class KeyChange:
    change: Literal["added", "replaced", "removed"]
    file: str
    key_id: str | None
    old_key_id: str | None = None
    endorsed_by: str | None = None
    problem: str | None = None  # why it is refused; None when it is endorsed (or a removal)
    relay_site: str | None = None  # a gateway site's relay key (keys/gateway-relay/SITE.pub), not a federation key

    def describe(self) -> str:
        if self.relay_site is not None:
            was = f", was {self.old_key_id}" if self.old_key_id else ""
            now = f" {self.key_id}" if self.key_id else f" {self.old_key_id}"
            return (
                f"relay key{now} of gateway site `{self.relay_site}` {self.change} ({self.file}){was}: "
                f"relays signed by {'it' if self.key_id else 'that site'} are "
                f"{'believed' if self.key_id else 'no longer believed'} as entering at `{self.relay_site}`"
            )
        if self.change == "removed":
            return f"key {self.old_key_id} removed ({self.file}): nodes it signed are no longer trusted"
        what = f"key {self.key_id} {self.change} ({self.file})"
        if self.old_key_id:
            what += f", was {self.old_key_id}"
        return what + (f", endorsed by trusted key {self.endorsed_by}" if self.endorsed_by else f": {self.problem}")


@dataclass
class TrustRoot:
    """The keys a site repo's nodes are judged by, and how a change altered them."""

    keys: dict[str, Ed25519PublicKey]
    base_revision: str | None = None
    base_keys: dict[str, Ed25519PublicKey] = field(default_factory=dict)  # the base revision's own
    changes: list[KeyChange] = field(default_factory=list)
    refused: list[Problem] = field(default_factory=list)

    def require_accepted(self) -> None:
        if self.refused:
            raise PolicyRefusal(
                f"the change against {self.base_revision} alters what the federation trusts, unsigned by a trusted key",
                problems=self.refused,
                hint="endorse a new key with a key the base trusts: fabric keys add NEW.pub --site-repo DIR --key OLD",
            )


def trust_root(root: Path, base_rev: str | None = None, keyring: Path | None = None) -> TrustRoot:
    """The repo's own keys; with `base_rev` the base revision's keys plus the keys they endorsed; with
    `keyring` (a folder of *.pub outside the repo) the keyring's keys plus the repo keys they endorsed."""
    current = public_key_files(root)
    if keyring is not None:
        return _judged_by_keyring(root, current, keyring, base_rev)
    if base_rev is None:
        return TrustRoot({key_id(k): k for k in current.values()})
    _check_revision(root, base_rev)
    base = _keys_at(root, base_rev, KEYS_DIR)
    base_ids = {key_id(k) for k in base.values()}
    trusted_base = {key_id(k): k for k in base.values()}
    trust = TrustRoot({}, base_rev, trusted_base)
    for name in sorted(current.keys() | base.keys()):
        file = f"{KEYS_DIR}/{name}"
        new, old = current.get(name), base.get(name)
        if new is None:
            assert old is not None
            trust.changes.append(KeyChange("removed", file, None, key_id(old)))
            continue
        kid = key_id(new)
        if old is not None and key_id(old) == kid:
            trust.keys[kid] = new
            continue
        kind: Literal["added", "replaced"] = "replaced" if old is not None else "added"
        old_id = key_id(old) if old is not None else None
        if kid in base_ids:  # the same key under another file name: nothing new is trusted
            trust.changes.append(KeyChange(kind, file, kid, old_id, endorsed_by=kid))
            trust.keys[kid] = new
            continue
        _judge_new_key(trust, root, name, new, kind, old_id, trusted_base)
    trust.refused += _retirements_undone(root, base_rev)
    trust.changes += _relay_key_changes(root, base_rev)
    return trust


def _relay_key_changes(root: Path, base_rev: str) -> list[KeyChange]:
    """The gateway sites' relay keys the change adds, replaces or removes: listed for the reviewer, not judged
    (a relay key signs relays, never nodes; who merges the change decides which key speaks for a site)."""
    current = public_key_files(root, RELAY_KEYS_DIR)
    base = _keys_at(root, base_rev, RELAY_KEYS_DIR)
    changes = []
    for name in sorted(current.keys() | base.keys()):
        new, old = current.get(name), base.get(name)
        new_id, old_id = (key_id(new) if new else None), (key_id(old) if old else None)
        if new_id == old_id:
            continue
        kind: Literal["added", "replaced", "removed"] = "removed" if new is None else "replaced" if old else "added"
        site = name.removesuffix(".pub")
        changes.append(KeyChange(kind, f"{RELAY_KEYS_DIR}/{name}", new_id, old_id, relay_site=site))
    return changes


def _judge_new_key(
    trust: TrustRoot, root: Path, name: str, new: Ed25519PublicKey, kind: Literal["added", "replaced"],
    old_id: str | None, trusted: dict[str, Ed25519PublicKey],
) -> None:  # fmt: skip
    """Trust `new` (keys/NAME) when an endorsement by one of `trusted` holds; list the change either way."""
    file = f"{KEYS_DIR}/{name}"
    kid = key_id(new)
    endorsement = root / KEYS_DIR / (name + ENDORSEMENT_SUFFIX)
    signer: str | None = None
    problem: str | None = f"no endorsement ({file}{ENDORSEMENT_SUFFIX}) by a trusted key"
    if endorsement.is_file() and not endorsement.is_symlink():
        signer, problem = endorsement_signer(new, endorsement.read_bytes()[:65536], trusted)
    trust.changes.append(KeyChange(kind, file, kid, old_id, signer, problem))
    if signer is not None:
        trust.keys[kid] = new
    else:
        trust.refused.append(Problem(f"key {kid} {kind}: {problem}", file=root / file))


def _judged_by_keyring(
    root: Path, current: dict[str, Ed25519PublicKey], keyring: Path, base_rev: str | None
) -> TrustRoot:
    """Keys of the repo judged by a keyring the operator keeps outside it: what is not in it needs its endorsement."""
    if not keyring.is_dir() or keyring.is_symlink():
        raise UsageError(f"keyring {keyring} is not a folder", hint="a folder of the federation's *.pub files")
    ring = {key_id(k): k for k in public_key_files(keyring, folder=".").values()}
    if not ring:
        raise UsageError(f"keyring {keyring} holds no Ed25519 *.pub key", hint="copy the federation's keys there")
    trust = TrustRoot({}, base_rev, dict(ring))
    for name, key in sorted(current.items()):
        if key_id(key) in ring:
            trust.keys[key_id(key)] = key
        else:
            _judge_new_key(trust, root, name, key, "added", None, ring)
    if base_rev is not None:
        _check_revision(root, base_rev)
        trust.refused += _retirements_undone(root, base_rev)
        trust.changes += _relay_key_changes(root, base_rev)
    return trust


def _check_revision(root: Path, rev: str) -> None:
    top, _ = _repo_prefix(root)
    known = (
        not rev.startswith("-")
        and gitrepo.git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip()
    )
    if not known:
        raise UsageError(
            f"`{rev}` is not a revision of the git repository {top}", hint="e.g. --base main or --base HEAD~1"
        )


def _keys_at(root: Path, rev: str, keys_dir: str) -> dict[str, Ed25519PublicKey]:
    """KEYS_DIR/*.pub of the site repo at `rev`, by file name."""
    top, prefix = _repo_prefix(root)
    folder = (PurePosixPath(prefix) / keys_dir).as_posix()
    listed = gitrepo.git(top, "ls-tree", "--name-only", rev, "--", folder + "/", check=False).splitlines()
    keys: dict[str, Ed25519PublicKey] = {}
    for name in listed:
        if not name.endswith(".pub"):
            continue
        pem = gitrepo.show_file(top, rev, name)
        key = parse_public_key(pem.encode("utf-8"), Path(f"{rev}:{name}")) if pem is not None else None
        if key is not None:
            keys[PurePosixPath(name).name] = key
    return keys


def _repo_prefix(root: Path) -> tuple[Path, str]:
    resolved = root.resolve()
    top = Path(gitrepo.git(resolved, "rev-parse", "--show-toplevel").strip())
    return top, gitrepo.git(resolved, "rev-parse", "--show-prefix").strip()


def _retirements_undone(root: Path, rev: str) -> list[Problem]:
    """A retirement record the base had and the change deletes, or a retired node made active again."""
    top, prefix = _repo_prefix(root)
    out = []
    for folder in (RETIRED, "nodes"):
        path = (PurePosixPath(prefix) / folder).as_posix() + "/"
        for name in gitrepo.git(top, "ls-tree", "--name-only", rev, "--", path, check=False).splitlines():
            stem = PurePosixPath(name).stem
            here = root / folder / PurePosixPath(name).name
            if folder == RETIRED and not here.exists():
                out.append(Problem(f"the retirement record of node `{stem}` is deleted", file=here, hint="restore it"))
            elif folder == "nodes" and here.is_file():
                out += _reactivated(here, gitrepo.show_file(top, rev, name), stem)
    return out


def _reactivated(path: Path, base_text: str | None, name: str) -> list[Problem]:
    if base_text is None:
        return []
    try:
        before = validate_document(parse_yaml(base_text, path), NodeManifest)
        now = load_model(path, NodeManifest)
    except ConfigError:
        return []  # an unreadable manifest is reported by the loader
    if before.status == "retired" and now.status != "retired" and now.enrolled_at <= before.enrolled_at:
        return [
            Problem(
                f"node `{name}` was retired at the base revision; this change restores its manifest from before",
                file=path,
                hint="re-enroll the machine (`fabric enroll`) to bring it back",
            )
        ]
    return []


def _refuse_existing(path: Path, *, tracked: bool) -> None:
    if path.exists() and tracked:
        raise UsageError(f"{path} exists", hint="choose another name with --name")


@dataclass(frozen=True)
class AddedKey:
    path: Path
    endorsement: Path
    key_id: str
    signer: str
    commit: str | None


def add_key(root: Path, public_file: Path, signer: Ed25519PrivateKey, name: str | None = None) -> AddedKey:
    """Copy a public key into keys/ with its endorsement by `signer`, which must be a key keys/ already holds."""
    new = load_public_key(public_file)
    trusted = load_public_keys(root)
    signer_id = key_id(signer.public_key())
    if signer_id not in trusted:
        raise PolicyRefusal(
            f"the signing key {signer_id} is not one of the site repo's keys",
            hint="endorse with a key the federation already trusts (--key)",
        )
    stem = check_name(name or public_file.name.removesuffix(".pub").lower(), "key name")
    path = repo_path(root, KEYS_DIR, f"{stem}.pub")
    endorsement = path.with_name(path.name + ENDORSEMENT_SUFFIX)
    pem = new.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    if not gitrepo.is_repo(root):
        _refuse_existing(path, tracked=True)
        write_atomic(path, pem)
        write_atomic(endorsement, endorse_key(new, signer))
        return AddedKey(path, endorsement, key_id(new), signer_id, None)
    paths = [path, endorsement]
    with gitrepo.write_lock(root, (KEYS_DIR,)):
        # an uncommitted file of that name is what a killed `keys add` left: this run completes it
        _refuse_existing(path, tracked=gitrepo.in_head(root, path))
        with gitrepo.rolled_back_on_error(root, paths):
            write_atomic(path, pem)
            write_atomic(endorsement, endorse_key(new, signer))
            commit = gitrepo.commit_paths(root, paths, f"add key {key_id(new)}, endorsed by {signer_id}")
    return AddedKey(path, endorsement, key_id(new), signer_id, commit)
