"""Node manifest signatures: Ed25519 over the canonical content of the manifest.

Canonical content = the manifest without its `signature` block, as sorted-key compact JSON of
`model_dump(mode="json")`. Defaults are included, so writing a default value out explicitly
does not change the signature, while any change of any value does.

The federation's public keys live in the site repo (`keys/*.pub`, PEM); the private key lives
outside it (mode 0600). A key is named by its key id: the first 16 hex digits of the SHA-256 of
the raw public key. A key added after the first is endorsed by a key the federation already
trusts: `keys/NAME.pub.endorsement` holds that key's signature over the new key (llm_fabric.trust.root
decides, against the base revision, which keys a change may use).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import UsageError
from llm_fabric.site.models import NodeManifest, Signature
from llm_fabric.site.root import require_site_root

KEYS_DIR = "keys"
# each gateway site's public relay key (SITE.pub): what the other sites believe its relays by (gateway/relay_keys.py)
RELAY_KEYS_DIR = "keys/gateway-relay"
PUBLIC_KEY_FILE = "enrollment.pub"
KEY_ENV = "FABRIC_ENROLLMENT_KEY"
ENDORSEMENT_SUFFIX = ".endorsement"
# domain separation: an endorsement can never be mistaken for a manifest or report signature
_ENDORSEMENT_CONTEXT = b"llm-fabric key endorsement v1\n"
# a PEM public key is a few hundred bytes; anything larger in keys/ is not one
_MAX_KEY_FILE = 64 * 1024


# Fields added to the manifest after manifests were first signed: left out of the canonical content
# while empty, so manifests signed before they existed still verify; signed like any field once set.
ADDED_WHEN_EMPTY = (("host", "rdma"), ("host", "storage_read_mb_s"))


def canonical_bytes(manifest: NodeManifest) -> bytes:
    content = manifest.model_dump(mode="json", exclude={"signature"})
    for section, key in ADDED_WHEN_EMPTY:
        if not content.get(section, {}).get(key, True):
            del content[section][key]
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign_manifest(manifest: NodeManifest, private: Ed25519PrivateKey) -> NodeManifest:
    value = base64.b64encode(private.sign(canonical_bytes(manifest))).decode("ascii")
    return manifest.model_copy(update={"signature": Signature(key_id=key_id(private.public_key()), value=value)})


def verify_manifest(manifest: NodeManifest, public_keys: dict[str, Ed25519PublicKey]) -> str | None:
    """None when the signature holds; otherwise what is wrong, in words."""
    sig = manifest.signature
    if sig is None:
        return "the manifest is not signed"
    public = public_keys.get(sig.key_id)
    if public is None:
        known = ", ".join(sorted(public_keys)) or "none"
        return f"signed by key {sig.key_id}, which is not a trusted key (trusted: {known})"
    try:
        public.verify(base64.b64decode(sig.value, validate=True), canonical_bytes(manifest))
    except (InvalidSignature, ValueError):
        return "the signature does not match the content: the manifest was changed after it was signed"
    return None


def default_private_key_path(site_root: Path, *, new_repo: bool = False) -> Path:
    """`$FABRIC_ENROLLMENT_KEY`, else `<site repo>.enrollment.key` beside the repo (never inside it).

    The default is named after the repo, so a folder that is no site repo is the mistake to report (with
    how to name the repo), not a key missing beside it; `new_repo` for the commands that make one.
    """
    from_env = os.environ.get(KEY_ENV)
    if from_env:
        return Path(from_env)
    if not new_repo:
        require_site_root(site_root)
    resolved = site_root.resolve()
    return resolved.parent / f"{resolved.name}.enrollment.key"


@dataclass
class KeyPair:
    private_path: Path
    public_path: Path
    key_id: str
    created: bool


def init_keys(site_root: Path, private_path: Path | None = None, *, reuse: bool = False) -> KeyPair:
    """Create the federation's enrollment key pair: public key into the repo, private key outside it."""
    private_path = private_path or default_private_key_path(site_root, new_repo=True)
    public_path = site_root / KEYS_DIR / PUBLIC_KEY_FILE
    if private_path.resolve().is_relative_to(site_root.resolve()):
        raise UsageError(f"{private_path} is inside the site repo", hint="keep the private key outside the repo")
    if public_path.exists() and not (reuse and private_path.exists()):
        _refuse_overwrite(public_path)
    if private_path.exists():
        if not reuse:
            raise UsageError(f"{private_path} already exists", hint="use it, or give another --private-key path")
        private = load_private_key(private_path)
        created = False
    else:
        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        write_atomic(private_path, pem, mode=0o600)
        created = True
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if public_path.exists() and public_path.read_bytes() != public_pem:
        _refuse_overwrite(public_path)
    write_atomic(public_path, public_pem, mode=0o644)
    return KeyPair(private_path, public_path, key_id(private.public_key()), created)


def _refuse_overwrite(public_path: Path) -> None:
    # replacing the federation key would make every signed manifest fail verification at once
    raise UsageError(
        f"{public_path} already exists: the federation has a key, and `keys init` never replaces it",
        hint="rotate it as a reviewed change: `fabric keys rotate --site-repo DIR` (docs/enroll.md)",
    )


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError as exc:
        raise UsageError(
            f"enrollment private key {path} not found",
            hint="pass the federation's private key with --key or $FABRIC_ENROLLMENT_KEY "
            "(a site repo without keys/*.pub gets its first key from `fabric keys init --site-repo DIR`)",
        ) from exc
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"{path} is not a PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 key", hint="pass the federation's Ed25519 private key (--key)")
    if path.stat().st_mode & 0o077:
        raise UsageError(f"{path} is readable by others", hint=f"chmod 600 {path}")
    return key


def load_public_keys(site_root: Path) -> dict[str, Ed25519PublicKey]:
    return {key_id(key): key for key in public_key_files(site_root).values()}


def public_key_files(site_root: Path, folder: str = KEYS_DIR) -> dict[str, Ed25519PublicKey]:
    """ROOT/keys/*.pub by file name (a symlink or a file that is not a PEM key is a UsageError naming it)."""
    keys: dict[str, Ed25519PublicKey] = {}
    folder_path = site_root / folder
    if folder_path.is_symlink():
        raise UsageError(f"{folder_path} is a symbolic link", hint="keys/ must be a plain folder of the site repo")
    for path in sorted(folder_path.glob("*.pub")) if folder_path.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            raise UsageError(f"{path} is not a plain file", hint="replace it with the PEM file itself")
        key = parse_public_key(_read_small(path), path)
        if key is not None:
            keys[path.name] = key
    return keys


def _read_small(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(_MAX_KEY_FILE + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def parse_public_key(pem: bytes, where: Path) -> Ed25519PublicKey | None:
    """The Ed25519 key in `pem`; None for another kind of key; UsageError when it is no PEM public key."""
    if len(pem) > _MAX_KEY_FILE:
        raise UsageError(f"{where} is not a PEM public key (larger than {_MAX_KEY_FILE // 1024} KiB)")
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{where} is not a PEM public key: {exc}") from exc
    return key if isinstance(key, Ed25519PublicKey) else None


def raw_public_bytes(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def endorse_key(new: Ed25519PublicKey, signer: Ed25519PrivateKey) -> str:
    """The endorsement file's text: `signer` (a trusted federation key) vouches for `new`."""
    body = {
        "version": 1,
        "key_id": key_id(new),
        "signer": key_id(signer.public_key()),
        "value": base64.b64encode(signer.sign(_ENDORSEMENT_CONTEXT + raw_public_bytes(new))).decode("ascii"),
    }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def endorsement_signer(
    new: Ed25519PublicKey, endorsement: bytes, trusted: dict[str, Ed25519PublicKey]
) -> tuple[str | None, str | None]:
    """(id of the trusted key that endorsed `new`, None) when the endorsement holds; (None, why) otherwise."""
    try:
        body = json.loads(endorsement.decode("utf-8"))
        signer, value = str(body["signer"]), base64.b64decode(str(body["value"]), validate=True)
        named = str(body["key_id"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError):
        return None, "the endorsement file is malformed"
    if named != key_id(new):
        return None, f"the endorsement is for key {named}, not {key_id(new)}"
    public = trusted.get(signer)
    if public is None:
        return None, f"endorsed by key {signer}, which the base revision does not trust"
    try:
        public.verify(value, _ENDORSEMENT_CONTEXT + raw_public_bytes(new))
    except InvalidSignature:
        return None, "the endorsement signature does not verify"
    return signer, None


def load_public_key(path: Path) -> Ed25519PublicKey:
    """One PEM Ed25519 public key file (a copy of keys/*.pub given on a command line, say)."""
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a PEM public key: {exc}", hint="a PEM Ed25519 public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{path} is not an Ed25519 public key", hint="the federation's keys are Ed25519")
    return key
