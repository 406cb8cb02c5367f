"""Tenant API keys: `fabric tenants key issue` makes one, shows it once and commits only its SHA-256.

The tenant file is edited as a YAML tree (comments and layout kept), validated again, written
atomically and committed alone, under the repo's lock.
"""

from __future__ import annotations

import hashlib
import secrets
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from llm_fabric.atomicio import write_atomic
from llm_fabric.documents import dump_yaml, read_yaml, validate_document
from llm_fabric.errors import UsageError
from llm_fabric.site import gitrepo
from llm_fabric.site.models import Tenant, TenantKey
from llm_fabric.site.paths import check_name, repo_path

KEY_PREFIX = "fk-"


@dataclass(frozen=True)
class IssuedKey:
    tenant: str
    key: str
    key_id: str
    commit: str | None


@dataclass(frozen=True)
class RevokedKeys:
    tenant: str
    key_ids: list[str]
    commit: str | None


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _tenant_path(root: Path, tenant: str) -> Path:
    path = repo_path(root, "tenants", f"{check_name(tenant, 'tenant name')}.yaml")  # a name, never a path
    if not path.is_file():
        known = sorted(p.stem for p in (root / "tenants").glob("*.yaml")) if (root / "tenants").is_dir() else []
        raise UsageError(
            f"tenant `{tenant}` not found ({path} does not exist)", hint=f"tenants: {', '.join(known) or 'none'}"
        )
    return path


def _save(root: Path, path: Path, tree: CommentedMap, message: str) -> str | None:
    doc = read_yaml(path)
    doc.tree = tree
    validate_document(doc, Tenant)  # the edited file must still be a valid tenant
    write_atomic(path, dump_yaml(tree), mode=0o644)
    return gitrepo.commit_paths(root, [path], message) if gitrepo.is_repo(root) else None


def issue_key(root: Path, tenant: str, *, now: datetime | None = None, expires_at: datetime | None = None) -> IssuedKey:
    """A new key for `tenant`, committed as its hash; with `expires_at` the gateway refuses it from then on."""
    path = _tenant_path(root, tenant)
    issued = now or datetime.now(UTC)
    if expires_at is not None:
        expires_at = expires_at if expires_at.tzinfo is not None else expires_at.replace(tzinfo=UTC)
        if expires_at <= issued:
            raise UsageError(
                f"the key would expire at {expires_at.isoformat()}, before it is issued ({issued.isoformat()})",
                hint="give a later --expires-at (UTC), or none for a key that does not expire",
            )
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    digest = key_hash(key)
    entry = TenantKey(id=digest[:12], sha256=digest, issued_at=issued, expires_at=expires_at)
    with _edit_lock(root):
        tree = read_yaml(path).tree
        if not isinstance(tree, CommentedMap):
            raise UsageError(
                f"{path}: not a tenant mapping", hint=f"fix the file (`fabric validate -C {root}` names the problem)"
            )
        keys = tree.get("keys")
        if keys is None:
            keys = tree["keys"] = CommentedSeq()
        keys.append(CommentedMap(entry.model_dump(mode="json", exclude_none=True)))
        commit = _save(root, path, tree, f"tenants: key {entry.id} issued for {tenant}")
    return IssuedKey(tenant=tenant, key=key, key_id=entry.id, commit=commit)


def _edit_lock(root: Path) -> AbstractContextManager[None]:
    """Serialises read-edit-commit of tenant files (commit_paths takes the repo's own lock inside it)."""
    folder = root / ".git" if gitrepo.is_repo(root) else root / "tenants"
    return gitrepo.file_lock(folder / "fabric-tenants.lock")


def revoke_keys(root: Path, tenant: str, key_ids: list[str], *, all_keys: bool = False) -> RevokedKeys:
    if not key_ids and not all_keys:
        raise UsageError(
            "say which key to revoke", hint=f"give KEY_ID (see `fabric tenants key list {tenant} -C {root}`) or --all"
        )
    path = _tenant_path(root, tenant)
    with _edit_lock(root):
        tree = read_yaml(path).tree
        keys = tree.get("keys") if isinstance(tree, CommentedMap) else None
        present = [str(k.get("id")) for k in keys] if keys else []
        unknown = [k for k in key_ids if k not in present]
        if unknown:
            raise UsageError(
                f"tenant `{tenant}` has no key {', '.join(unknown)}", hint=f"its keys: {', '.join(present) or 'none'}"
            )
        gone = present if all_keys else key_ids
        if not gone:
            return RevokedKeys(tenant, [], None)
        tree["keys"] = CommentedSeq([k for k in keys or [] if str(k.get("id")) not in gone])
        commit = _save(root, path, tree, f"tenants: key(s) {', '.join(gone)} of {tenant} revoked")
    return RevokedKeys(tenant, gone, commit)


def list_keys(root: Path, tenant: str) -> list[TenantKey]:
    doc = read_yaml(_tenant_path(root, tenant))
    return validate_document(doc, Tenant).keys


def key_state(key: TenantKey, now: datetime) -> str:
    """How `tenants key list` describes a key's lifetime."""
    if key.expires_at is None:
        return "does not expire"
    return f"{'expired' if key.expires_at <= now else 'expires'} {key.expires_at.isoformat()}"
