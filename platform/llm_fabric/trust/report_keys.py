"""Which keys sign a report and which a reader trusts: the federation's, where `fabric init` put them.

A report is signed with `--sign-key`, else the federation's private key (beside the site repo, or
$FABRIC_ENROLLMENT_KEY); a reader trusts the site repo's `keys/*.pub` and/or one given public key.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.errors import UsageError
from llm_fabric.trust.signatures import (
    default_private_key_path,
    key_id,
    load_private_key,
    load_public_key,
    load_public_keys,
)


def signing_key(site_repo: Path, sign_key: Path | None) -> tuple[Ed25519PrivateKey | None, str]:
    """--sign-key, else the federation's key where `fabric init` put it (beside the repo, or $FABRIC_ENROLLMENT_KEY)."""
    if sign_key is not None:
        return load_private_key(sign_key), str(sign_key)
    default = default_private_key_path(site_repo)
    if default.is_file():
        return load_private_key(default), f"the federation key {default}"
    return None, f"no --sign-key given and no federation key at {default}"


def trusted_keys(site_repo: Path | None, public_key: Path | None) -> tuple[dict[str, Ed25519PublicKey] | None, str]:
    """Keys a report may be signed with: the site repo's keys/*.pub and/or one given file."""
    if site_repo is None and public_key is None:
        return None, ""
    keys: dict[str, Ed25519PublicKey] = {}
    sources = []
    if site_repo is not None:
        keys.update(load_public_keys(site_repo))
        if not keys:
            raise UsageError(
                f"{site_repo / 'keys'} holds no Ed25519 public key (*.pub)",
                hint="give the site repo whose keys/ holds the federation's keys (-C DIR), "
                "or the signer's key with --public-key FILE",
            )
        sources.append(f"{site_repo / 'keys'}")
    if public_key is not None:
        key = load_public_key(public_key)
        keys[key_id(key)] = key
        sources.append(str(public_key))
    return keys, " and ".join(sources)
