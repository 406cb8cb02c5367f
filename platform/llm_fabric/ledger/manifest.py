"""The report's signed manifest: SHA-256 of every file, signed with Ed25519 over a canonical form.

`manifest.json` = {"version": 1, "files": {name: sha256}, "signature": {...} | null}. The signed
bytes are the canonical JSON (sorted keys, no spaces) of the manifest without `signature`, so a
changed byte in any file changes its hash, and a changed hash breaks the signature. The signature
block carries the public key; `verify` trusts it only when it matches `--public-key`, if given.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import PolicyRefusal, Problem, UsageError

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


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(_raw(key)).hexdigest()[:16]


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        hint = "an unencrypted Ed25519 PEM (PKCS#8) key"
        raise UsageError(f"cannot load the signing key {path}: {exc}", hint=hint) from exc
    if not isinstance(key, Ed25519PrivateKey):
        hint = "create one with `openssl genpkey -algorithm ed25519`"
        raise UsageError(f"{path} is not an Ed25519 private key", hint=hint)
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        data = path.read_bytes()
        key = serialization.load_pem_public_key(data)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load the public key {path}: {exc}", hint="a PEM Ed25519 public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{path} is not an Ed25519 public key")
    return key


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


def _check_signature(out: Path, manifest: dict[str, Any], trusted: Ed25519PublicKey | None) -> str | None:
    sig = manifest.get("signature")
    if sig is None:
        if trusted is not None:
            raise PolicyRefusal(f"{out / MANIFEST} is not signed, but a public key was given")
        return None
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(sig["public_key"]))
        if trusted is not None and _raw(trusted) != _raw(public):
            signer, want = key_id(public), key_id(trusted)
            raise PolicyRefusal(f"the report was signed by key {signer}, not by the trusted key {want}")
        body = {k: v for k, v in manifest.items() if k != "signature"}
        public.verify(base64.b64decode(sig["value"]), _canonical(body))
    except (KeyError, TypeError, ValueError, InvalidSignature) as exc:
        where = out / MANIFEST
        raise PolicyRefusal(f"the signature of {where} does not verify", hint="the manifest was altered") from exc
    return key_id(public)


def verify(out: Path, trusted: Ed25519PublicKey | None = None) -> Verified:
    """Check every file's hash and the signature; PolicyRefusal (exit 3) naming what differs."""
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
    return Verified(len(manifest["files"]), kid is not None, kid)
