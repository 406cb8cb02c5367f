"""The front door between sites: which requests enter here, how one gateway relays to another, and the
answer a request gets when no site it may go to answers.

A request enters, and is metered, only at a gateway whose site its data class's sovereignty rule allows.
That gateway (the entry) serves it from its own site's replicas, or relays it to another allowed site's
gateway, never to that site's engines. A relay carries the federation's peer key ($FABRIC_GATEWAY_PEER_KEY,
the same Secret at every site) and names the tenant, the data class and the entry site in headers; the
relaying gateway trusts those headers only with that key. The entry meters the request (it sees the
status the client got), so the gateway that serves a relay writes no record of it: nothing is counted
twice. Retries happen at one layer: the entry's fallbacks; a relayed request never falls back again.
"""

from __future__ import annotations

import hmac
import os

from llm_fabric.gateway.runtime.settings import HookSettings

PEER_KEY_ENV = "FABRIC_GATEWAY_PEER_KEY"
TENANT_HEADER = "x-fabric-tenant"
ENTRY_HEADER = "x-fabric-entry-site"
UNAVAILABLE = 503


def is_peer_key(key: str) -> bool:
    """Whether `key` is the federation's peer key (never, where this gateway has none)."""
    expected = os.environ.get(PEER_KEY_ENV)
    return bool(expected) and hmac.compare_digest(key.encode(), str(expected).encode())


def relay_headers(tenant: str, entry_site: str | None) -> dict[str, str]:
    """Who the entry relays for (with the peer key as the bearer; the data class goes in its own header)."""
    return {TENANT_HEADER: tenant, ENTRY_HEADER: entry_site or ""}


def entry_refusal(settings: HookSettings, data_class: str) -> str | None:
    """Why a request of `data_class` may not enter this gateway (None: it may)."""
    if settings.site is None or data_class not in settings.entry_sites:
        return None
    sites = settings.entry_sites[data_class]
    if settings.site in sites:
        return None
    where = f"send it to the gateway at {', '.join(sites)}" if sites else "no site's gateway may take it"
    return (
        f"`{data_class}` data may not enter the gateway at `{settings.site}`: its sovereignty rule does not allow "
        f"the site; {where}"
    )


def unavailable_message(deployment: str, data_class: str, tried: list[str], fell_back: bool, retry_s: int) -> str:
    """The 503's message: no replica (or other site's gateway) answered before the first token."""
    if fell_back:
        return (
            f"`{deployment}` could not serve `{data_class}` data: no site it may go to answered "
            f"({', '.join(tried)}); retry in {retry_s} s"
        )
    return (
        f"`{deployment}` has no replica answering for `{data_class}` data at {', '.join(tried)}, and `{data_class}` "
        f"data does not fail over to another site or provider (its sovereignty rule); retry in {retry_s} s"
    )
