"""The report's signed manifest: SHA-256 of every file, signed with Ed25519 over a canonical form.

`manifest.json` = {"version": 1, "files": {name: sha256}, "signature": {...} | null}. The signed
bytes are the canonical JSON (sorted keys, no spaces) of the manifest without `signature`, so a
changed byte in any file changes its hash, and a changed hash breaks the signature.

Keys are the federation's (llm_fabric.signing: the same key files, loaders and key
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
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import PolicyRefusal, Problem, UsageError
from llm_fabric.signing import key_id

MANIFEST = "manifest.json"


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


def write_manifest(out: Path, names: list[str], key: Ed25519PrivateKey | None) -> dict[str, Any]:
    body: dict[str, Any] = {"version": 1, "files": {name: sha256_file(out / name) for name in sorted(names)}}
    signature = None
    if key is not None:
        public = key.public_key()
        signature = {
            "algorithm": "ed25519",
            "key_id": key_id(public),
            "public_key": base64.b64encode(_raw(public)).decode(),
            "value": base64.b64encode(key.sign(_canonical(body))).decode(),
        }
    manifest = {**body, "signature": signature}
    write_atomic(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


@dataclass(frozen=True)
class Verified:
    files: int
    signed: bool
    key_id: str | None
    authenticated: bool  # the signer is one of the trusted keys, not merely the key the manifest names


def _read_manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UsageError(f"{path} not found", hint="give the --out folder of `fabric report`") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise PolicyRefusal(f"{path} is unreadable or not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise PolicyRefusal(f"{path} has no `files` table")
    return manifest


def _signer(where: Path, sig: dict[str, Any]) -> Ed25519PublicKey:
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
                hint="re-run `fabric report` with the federation key",
            )
        return None
    if not isinstance(sig, dict):
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
        public.verify(base64.b64decode(sig["value"], validate=True), _canonical(body))
    except (KeyError, TypeError, ValueError, InvalidSignature) as exc:
        raise PolicyRefusal(f"the signature of {where} does not verify", hint="the manifest was altered") from exc
    return kid


def verify(out: Path, trusted: Mapping[str, Ed25519PublicKey] | None = None) -> Verified:
    """Check every file's hash and the signature; PolicyRefusal (exit 3) naming what differs.

    `trusted` (key id -> key): the manifest must be signed by one of them. None: integrity only,
    against the key the manifest carries (`Verified.authenticated` is then False).
    """
    manifest = _read_manifest(out)
    problems: list[Problem] = []
    for name, digest in sorted(manifest["files"].items()):
        path = out / name
        if not path.is_file():
            problems.append(Problem("listed in the manifest but missing", file=path))
        elif sha256_file(path) != digest:
            problems.append(Problem("content differs from the manifest (edited after signing)", file=path))
    listed = set(manifest["files"]) | {MANIFEST}
    for path in sorted(out.iterdir()):
        if path.is_file() and path.name not in listed:
            problems.append(Problem("not listed in the manifest (added after signing)", file=path))
    if problems:
        raise PolicyRefusal(f"report {out} does not match its manifest", problems=problems)
    kid = _check_signature(out, manifest, trusted)
    return Verified(len(manifest["files"]), kid is not None, kid, kid is not None and trusted is not None)
