"""The report's signed manifest: SHA-256 of every file, signed with Ed25519 over a canonical form.

`manifest.json` = {"version": 2, "files": {name: sha256}, "signature": {...} | null}. The signed
bytes are the canonical JSON (sorted keys, no spaces) of the manifest with the signature block's
metadata (algorithm, key id, public key) but not its value, so a changed byte in any file changes
its hash, and a changed hash or signature field breaks the signature. Version 1 (the metadata
unsigned, the algorithm checked) still verifies. Every file under the folder, in sub-folders too,
must be listed: an added, linked or missing file, or a missing manifest, is a refusal (exit 3).

Keys are the federation's (llm_fabric.trust.signatures: the same key files, loaders and key
ids as node manifests). The signature block also carries the signer's public key, but a key
found inside the thing being checked proves nothing about who made it: `verify` with trusted
keys (the site repo's keys/, or a given public key) checks authenticity; without them it checks
integrity only, and says so.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import PolicyRefusal, Problem, UsageError
from llm_fabric.trust.signatures import key_id

MANIFEST = "manifest.json"
ALGORITHM = "ed25519"
_SIGNED_META = ("algorithm", "key_id", "public_key")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _signed_bytes(body: dict[str, Any], sig: dict[str, Any]) -> bytes:
    """Version 2 signs the signature's metadata (algorithm, key id, key) with the body; version 1 the body only."""
    if body.get("version") == 1:
        return _canonical(body)
    meta = {k: sig.get(k) for k in _SIGNED_META}
    return _canonical({**body, "signature": meta})


def write_manifest(out: Path, names: list[str], key: Ed25519PrivateKey | None) -> dict[str, Any]:
    body: dict[str, Any] = {"version": 2, "files": {name: sha256_file(out / name) for name in sorted(names)}}
    signature = None
    if key is not None:
        public = key.public_key()
        signature = {
            "algorithm": ALGORITHM,
            "key_id": key_id(public),
            "public_key": base64.b64encode(_raw(public)).decode(),
        }
        signature["value"] = base64.b64encode(key.sign(_signed_bytes(body, signature))).decode()
    manifest = {**body, "signature": signature}
    write_atomic(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


@dataclass(frozen=True)
class Verified:
    files: int
    signed: bool
    key_id: str | None
    authenticated: bool  # the signer is one of the trusted keys, not merely the key the manifest names


def listed_files(out: Path) -> list[str]:
    """The names an earlier manifest lists ([] when none can be read): the files a re-run may replace."""
    try:
        manifest = json.loads((out / MANIFEST).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return []
    files = manifest.get("files") if isinstance(manifest, dict) else None
    return [n for n in files if isinstance(n, str) and _safe_name(n)] if isinstance(files, dict) else []


def _safe_name(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not PurePosixPath(name).is_absolute() and ".." not in parts and "\\" not in name


def _read_manifest(out: Path) -> dict[str, Any]:
    if not out.is_dir() or out.is_symlink():
        raise UsageError(f"{out} is not a report folder", hint="give the --out folder of `fabric report`")
    path = out / MANIFEST
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise PolicyRefusal(f"{path} is not a plain file", hint="the report folder was altered")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError as exc:
        # the folder is there but its manifest is gone: that is tampering, not a wrong argument
        raise PolicyRefusal(f"{path} is missing", hint="the report folder was altered; re-run `fabric report`") from exc
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PolicyRefusal(f"{path} is unreadable or not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise PolicyRefusal(f"{path} has no `files` table")
    if manifest.get("version") not in (1, 2):
        raise PolicyRefusal(
            f"{path} has an unknown version {manifest.get('version')!r}", hint="the manifest was altered"
        )
    return manifest


def _signer(where: Path, sig: dict[str, Any]) -> Ed25519PublicKey:
    if sig.get("algorithm") != ALGORITHM:
        raise PolicyRefusal(
            f"the signature block of {where} names algorithm {sig.get('algorithm')!r}",
            hint=f"reports are signed with {ALGORITHM}; the manifest was altered",
        )
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(sig["public_key"], validate=True))
    except (KeyError, TypeError, ValueError) as exc:
        raise PolicyRefusal(f"the signature block of {where} is malformed", hint="the manifest was altered") from exc
    if sig.get("key_id") != key_id(public):
        raise PolicyRefusal(
            f"the signature block of {where} names key {sig.get('key_id')} but holds key {key_id(public)}",
            hint="the manifest was altered",
        )
    return public


def _check_signature(out: Path, manifest: dict[str, Any], trusted: Mapping[str, Ed25519PublicKey] | None) -> str | None:
    where = out / MANIFEST
    sig = manifest.get("signature")
    if sig is None:
        if trusted is not None:
            raise PolicyRefusal(
                f"{where} is not signed, but trusted keys were given",
                hint="re-run `fabric report` with `--sign-key FILE`, the federation's private key",
            )
        return None
    if not isinstance(sig, dict) or set(sig) - {*_SIGNED_META, "value"}:
        raise PolicyRefusal(f"the signature block of {where} is malformed", hint="the manifest was altered")
    public = _signer(where, sig)
    kid = key_id(public)
    if trusted is not None:
        if kid not in trusted:
            known = ", ".join(sorted(trusted)) or "none"
            raise PolicyRefusal(
                f"the report was signed by key {kid}, which is not a trusted key (trusted: {known})",
                hint="someone else signed it, or the federation's key changed",
            )
        public = trusted[kid]
    body = {k: v for k, v in manifest.items() if k != "signature"}
    try:
        public.verify(base64.b64decode(sig["value"], validate=True), _signed_bytes(body, sig))
    except (KeyError, TypeError, ValueError, InvalidSignature) as exc:
        raise PolicyRefusal(f"the signature of {where} does not verify", hint="the manifest was altered") from exc
    return kid


def _tree_problems(out: Path, files: dict[str, Any]) -> list[Problem]:
    """Every difference between the folder tree and the manifest: missing, changed, added, linked or special."""
    problems: list[Problem] = []
    for name, digest in sorted(files.items()):
        path = out / name
        if not _safe_name(name):
            problems.append(Problem("listed name leads outside the report folder", file=path))
        elif path.is_symlink() or (path.exists() and not path.is_file()):
            problems.append(Problem("not a plain file (a link, folder or device)", file=path))
        elif not path.is_file():
            problems.append(Problem("listed in the manifest but missing", file=path))
        elif sha256_file(path) != digest:
            problems.append(Problem("content differs from the manifest (edited after signing)", file=path))
    listed = {PurePosixPath(n).as_posix() for n in files} | {MANIFEST}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue  # a folder is judged by its files: an empty one holds nothing to trust
        if rel not in listed:
            problems.append(Problem("not listed in the manifest (added after signing)", file=path))
    return problems


def verify(out: Path, trusted: Mapping[str, Ed25519PublicKey] | None = None) -> Verified:
    """Check every file of the folder tree and the signature; PolicyRefusal (exit 3) naming what differs.

    `trusted` (key id -> key): the manifest must be signed by one of them. None: integrity only,
    against the key the manifest carries (`Verified.authenticated` is then False).
    """
    manifest = _read_manifest(out)
    problems = _tree_problems(out, manifest["files"])
    if problems:
        raise PolicyRefusal(f"report {out} does not match its manifest", problems=problems)
    kid = _check_signature(out, manifest, trusted)
    return Verified(len(manifest["files"]), kid is not None, kid, kid is not None and trusted is not None)
