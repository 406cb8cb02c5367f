"""The gateway sites' relay keys in the site repo: each site's public key, `keys/gateway-relay/SITE.pub`.

A gateway signs the relays entering at its site with its own Ed25519 key (gateway/runtime/relay.py,
issue 39 F1). The private key stays with that site's operator (the Secret `fabric-gateway-relay-key` of
that site's cluster, made from the file `fabric gateway relay-key` wrote outside the repo); the public
keys are reviewed files of the site repo, rendered at every site into the ConfigMap the serving gateway
believes relays by. A change to one is listed by `fabric plan --base` and `fabric validate --base`
(trust/root.py); `fabric validate` refuses a file that is no Ed25519 public key or names no gateway site.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import Problem, UsageError
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.paths import check_name, repo_path, unsafe_entry
from llm_fabric.site.validation import Finding
from llm_fabric.trust.signatures import RELAY_KEYS_DIR, parse_public_key, raw_public_bytes


def relay_key_path(root: Path, site: str) -> Path:
    return root / RELAY_KEYS_DIR / f"{site}.pub"


def read_relay_keys(site: SiteRepo) -> tuple[dict[str, Ed25519PublicKey], list[Finding]]:
    """The public relay keys of the sites that run a gateway, by site, and a Finding (file:1) for each file
    that is no such key: a config problem, or a warning for the key of a site of fabric.yaml that runs none
    (not rendered: a relay never enters there)."""
    folder = site.root / RELAY_KEYS_DIR
    keys: dict[str, Ed25519PublicKey] = {}
    findings: list[Finding] = []
    if (unsafe := unsafe_entry(folder)) is not None:
        return keys, [Finding("config", unsafe)]
    running = site.config.gateway_sites()
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if (unsafe := unsafe_entry(path)) is not None:
            findings.append(Finding("config", unsafe))
            continue
        name = path.name.removesuffix(".pub")
        if not path.name.endswith(".pub") or name not in site.config.sites:
            message = f"`{path.name}` is not the relay key of a site that runs a gateway"
            hint = f"name it SITE.pub, SITE one of {', '.join(running)}; or remove it"
            findings.append(Finding("config", Problem(message, file=path, line=1, hint=hint)))
            continue
        try:
            key = parse_public_key(path.read_bytes()[:65536], path)
        except UsageError:
            key, why = None, "it holds no PEM public key"
        else:
            why = "it holds another kind of key"
        if key is None:
            hint = f"write it with `fabric gateway relay-key {name} -C {site.root} --replace`"
            findings.append(
                Finding("config", Problem(f"not an Ed25519 public key: {why}", file=path, line=1, hint=hint))
            )
        elif name not in running:
            message = f"site `{name}` runs no gateway: its relay key is not rendered"
            hint = f"remove {path.name}, or add `{name}:` under gateway.sites"
            findings.append(Finding("warning", Problem(message, file=path, line=1, hint=hint)))
        else:
            keys[name] = key
    return keys, findings


def peers_document(keys: dict[str, Ed25519PublicKey]) -> str:
    """$FABRIC_GATEWAY_RELAY_PEERS's file: {site: base64 raw public key} (gateway/runtime/relay.peer_keys)."""
    peers = {s: base64.b64encode(raw_public_bytes(k)).decode() for s, k in sorted(keys.items())}
    return json.dumps(peers, indent=2, sort_keys=True) + "\n"


def create_relay_key(site: SiteRepo, site_id: str, private_out: Path, *, replace: bool) -> Path:
    """A new key pair for `site_id`'s gateway: the private key (PKCS#8 PEM, mode 0600) to `private_out`, which
    must be outside the repo, and its public key to keys/gateway-relay/SITE.pub. Returns the public key's path."""
    check_name(site_id, "site")
    if site_id not in site.config.gateway_sites():
        raise UsageError(f"site `{site_id}` runs no gateway", hint=f"one of {', '.join(site.config.gateway_sites())}")
    if private_out.resolve().is_relative_to(site.root.resolve()):
        raise UsageError(
            f"{private_out} is inside the site repo {site.root}: a private key is never committed",
            hint="write it outside the repo, e.g. --private-key ~/relay-SITE.pem",
        )
    public_path = repo_path(site.root, *RELAY_KEYS_DIR.split("/"), f"{site_id}.pub")
    for path in (public_path, private_out):
        if path.exists() and not replace:
            raise UsageError(f"{path} exists", hint="pass --replace to make a new key pair (a review lists it)")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write_atomic(private_out, private_pem, mode=0o600)
    public_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(public_path, public_pem)
    return public_path
