"""Signed relays: what the entry site asserts about a request it relays, signed with that site's own key.

Issue 39 (F1): the federation's peer key alone made any holder a master key (any tenant, no limit, no
budget, no record). Now the entry gateway signs an assertion (tenant, data class, request id, entry and
serving site, expiry) with its site's Ed25519 key ($FABRIC_GATEWAY_RELAY_KEY, a PKCS#8 PEM file that only
that site holds), and the serving gateway believes a relay only when the signature verifies under the
entry site's public key ($FABRIC_GATEWAY_RELAY_PEERS, a JSON file {site: base64 raw public key}, the same
at every site). A site's key speaks only for that site: with its own key, one compromised site can assert
only relays entering at itself, for a tenant and class that may enter there, and gets at the serving
site no more than the tenant's own key would (its limits, budget, priority and classes).

The header, `x-fabric-relay`: base64url(JSON payload) "." base64url(signature of those payload bytes).
An assertion is good for `TTL_S` seconds and once per serving process (its request id is remembered
until it expires): a captured header cannot be replayed for another request.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from llm_fabric.atomicio import write_atomic

RELAY_HEADER = "x-fabric-relay"
RELAY_KEY_ENV = "FABRIC_GATEWAY_RELAY_KEY"  # this site's private key (PEM), from a Secret only it holds
RELAY_PEERS_ENV = "FABRIC_GATEWAY_RELAY_PEERS"  # every site's public key (JSON), from a ConfigMap
TTL_S = 120.0


@dataclass(frozen=True)
class Assertion:
    entry: str
    to: str
    tenant: str
    data_class: str
    request_id: str
    expires: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key() -> Ed25519PrivateKey | None:
    """This site's relay key, or None where it has none (its relays then go unsigned and are refused)."""
    path = os.environ.get(RELAY_KEY_ENV)
    if not path:
        return None
    key = load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"${RELAY_KEY_ENV} ({path}) is not an Ed25519 private key")
    return key


def peer_keys() -> dict[str, Ed25519PublicKey]:
    """Every site's public relay key, by site ({} where none is configured: no relay is believed)."""
    path = os.environ.get(RELAY_PEERS_ENV)
    if not path:
        return {}
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return {str(site): Ed25519PublicKey.from_public_bytes(base64.b64decode(str(v))) for site, v in raw.items()}


def sign(key: Ed25519PrivateKey, assertion: Assertion) -> str:
    payload = json.dumps(
        {
            "v": 1,
            "entry": assertion.entry,
            "to": assertion.to,
            "tenant": assertion.tenant,
            "class": assertion.data_class,
            "id": assertion.request_id,
            "exp": assertion.expires,
        },
        sort_keys=True,
    ).encode()
    return f"{_b64(payload)}.{_b64(key.sign(payload))}"


class Verifier:
    """The serving site's check of relay assertions, with the request ids it has already taken."""

    def __init__(self, site: str | None, keys: dict[str, Ed25519PublicKey]) -> None:
        self.site = site
        self.keys = keys
        self._taken: dict[str, float] = {}

    def verify(self, header: str | None, now: float) -> Assertion | str:
        """The assertion, or why it is not believed."""
        if not header:
            return "a relay must carry its entry site's signed assertion (x-fabric-relay)"
        try:
            encoded, signature = header.split(".", 1)
            payload = _unb64(encoded)
            body = json.loads(payload)
            entry = str(body["entry"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            return "the relay's assertion is malformed"
        key = self.keys.get(entry)
        if key is None:
            return f"the relay names entry site `{entry}`, whose relay key this gateway does not know"
        try:
            key.verify(_unb64(signature), payload)
        except (InvalidSignature, ValueError, binascii.Error):
            return f"the relay's assertion is not signed by `{entry}`'s relay key"
        try:
            assertion = Assertion(
                entry,
                str(body["to"]),
                str(body["tenant"]),
                str(body["class"]),
                str(body["id"]),
                float(body["exp"]),
            )
        except (KeyError, TypeError, ValueError):
            return "the relay's assertion is malformed"
        if assertion.to != self.site:
            return f"the relay's assertion is for `{assertion.to}`, not this gateway's site `{self.site}`"
        if assertion.expires <= now or assertion.expires > now + 2 * TTL_S:
            return "the relay's assertion has expired (or claims too long a life)"
        for taken in [i for i, until in self._taken.items() if until <= now]:
            del self._taken[taken]
        if assertion.request_id in self._taken:
            return f"the relay's assertion for request {assertion.request_id} was already used"
        self._taken[assertion.request_id] = assertion.expires
        return assertion


def assertion_header(
    key: Ed25519PrivateKey | None, entry: str | None, to: str, tenant: str, data_class: str, request_id: str
) -> dict[str, str]:
    """The header the entry adds to a relay ({} where this site has no relay key)."""
    if key is None or entry is None:
        return {}
    assertion = Assertion(entry, to, tenant, data_class, request_id, time.time() + TTL_S)
    return {RELAY_HEADER: sign(key, assertion)}


def write_site_keys(folder: Path, sites: list[str]) -> tuple[dict[str, Path], Path]:
    """A relay key per site (PEM, mode 0600) and the federation's public keys (JSON): for local runs and tests;
    in a cluster each site's key is a Secret of that site only and the public keys a ConfigMap."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    private: dict[str, Path] = {}
    public: dict[str, str] = {}
    for site in sites:
        key = Ed25519PrivateKey.generate()
        path = folder / f"relay-{site}.pem"
        write_atomic(path, key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()), mode=0o600)
        private[site] = path
        public[site] = base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    peers = folder / "relay-peers.json"
    write_atomic(peers, json.dumps(public, indent=2, sort_keys=True) + "\n")
    return private, peers
