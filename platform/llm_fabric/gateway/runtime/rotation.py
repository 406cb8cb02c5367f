"""Gateway rotation: the replicas the canary prober takes out are left out of LiteLLM's routing.

The prober (`fabric canary --serve`, `live.prober`) decides: a replica whose canary fails (an engine
that is down fails it), whose node has a firing node-fatal Xid alert or is cordoned. This module reads
its `GET /rotation` ($FABRIC_CANARY_URL) at most every `REFRESH_S` seconds and filters the
deployments LiteLLM's router may pick, so a replica goes out and comes back without a git change.

Why this hook and not LiteLLM's own mechanisms (litellm 1.108.7): the router's cooldowns take a
deployment out for `cooldown_time` after failed calls, and lapse by themselves; a replica that answers
200 with the wrong tokens never fails a call. The proxy's background health checks send a request
and look only for an answer. The router's filtering hook, `CustomLogger.async_filter_deployments`
(`Router.async_callback_filter_deployments`, run on every pick after the cooldowns), is the proxy's
own place to narrow the deployments a request may go to, and the hooks already use it for sites.

An entry of one replica (`model_info.fabric_replica`, DEPLOYMENT/INDEX) is left out while that
replica is out; an entry of a site's Service (`fabric_site`, `fabric_deployment`) while every replica
of the deployment at that site is out (the Service's own readiness takes single pods out there). It
fails open: a prober that cannot be read takes nothing out (its last answer stands for
`STALE_AFTER_S`), and a filter that would leave a request no deployment at all leaves the list as
it was: the alerts page a human for a deployment that is wholly out, the gateway does not black it out.

Draining (a replica's preStop told the prober, reason `draining`) is one more way out, and the reason
the gateway reads the prober rather than the Services: its entries are the replicas' direct Services,
which readiness empties only after a probe period or two, and LiteLLM would keep picking the entry
until a call to it failed. The filter acts at pick time only, so a stream already running on the
replica goes on to its end; what the gateway picks in the `REFRESH_S` before it reads the mark, the
drain counts and waits for (its settle is longer: serving/probes.DRAIN_SETTLE_S). The only
replica of a deployment is not taken out while it drains (fail open, as above): there is no other
to send its requests to; restarting it is an outage, which the rollout review shows, and what it
still takes its drain waits for.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from llm_fabric.names import (
    CANARY_ROTATION,
    CANARY_URL_ENV,
    MODEL_INFO_DEPLOYMENT,
    MODEL_INFO_REPLICA,
    MODEL_INFO_SITE,
    ROTATION_DEPLOYMENT,
    ROTATION_IN,
    ROTATION_REFRESH_S,
    ROTATION_REPLICA,
    ROTATION_REPLICAS,
    ROTATION_SITE,
)

REFRESH_S = ROTATION_REFRESH_S
TIMEOUT_S = 2.0
STALE_AFTER_S = 120.0  # an answer older than this takes nothing out any more


@dataclass(frozen=True)
class Out:
    """What the prober's last answer took out."""

    replicas: frozenset[str] = frozenset()  # DEPLOYMENT/INDEX
    sites: frozenset[tuple[str, str]] = frozenset()  # (deployment, site) with every replica out


def parse_rotation(document: dict[str, Any]) -> Out:
    """The prober's `GET /rotation` document as the replicas and sites it takes out."""
    replicas: set[str] = set()
    per_site: dict[tuple[str, str], list[bool]] = {}
    for entry in document.get(ROTATION_REPLICAS) or []:
        if not isinstance(entry, dict):
            continue
        key = (str(entry.get(ROTATION_DEPLOYMENT)), str(entry.get(ROTATION_SITE)))
        inside = bool(entry.get(ROTATION_IN, True))
        per_site.setdefault(key, []).append(inside)
        if not inside:
            replicas.add(str(entry.get(ROTATION_REPLICA)))
    sites = {key for key, states in per_site.items() if states and not any(states)}
    return Out(frozenset(replicas), frozenset(sites))


def _is_out(entry: Any, out: Out) -> bool:
    info = (entry.get("model_info") or {}) if isinstance(entry, dict) else {}
    replica = info.get(MODEL_INFO_REPLICA)
    if replica is not None:
        return str(replica) in out.replicas
    site, deployment = info.get(MODEL_INFO_SITE), info.get(MODEL_INFO_DEPLOYMENT)
    return site is not None and (str(deployment), str(site)) in out.sites


@dataclass
class Rotation:
    url: str | None
    out: Out = field(default_factory=Out)
    fetched_at: float | None = None  # monotonic time of the last answer
    tried_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def _fetch(self) -> Out:
        assert self.url is not None
        with urllib.request.urlopen(self.url.rstrip("/") + "/" + CANARY_ROTATION, timeout=TIMEOUT_S) as response:
            return parse_rotation(json.loads(response.read()))

    async def current(self) -> Out:
        if self.url is None:
            return Out()
        now = time.monotonic()
        if self.tried_at is None or now - self.tried_at >= REFRESH_S:
            async with self.lock:
                if self.tried_at is None or now - self.tried_at >= REFRESH_S:
                    self.tried_at = now
                    try:
                        self.out = await asyncio.to_thread(self._fetch)
                        self.fetched_at = time.monotonic()
                    except (urllib.error.URLError, OSError, ValueError):
                        pass  # the last answer stands until it is stale
        if self.fetched_at is None or time.monotonic() - self.fetched_at > STALE_AFTER_S:
            return Out()
        return self.out

    async def keep(self, deployments: list[Any]) -> list[Any]:
        """`deployments` without those out of rotation; all of them when none would be left."""
        out = await self.current()
        kept = [d for d in deployments if not _is_out(d, out)]
        return kept or deployments


_rotation: Rotation | None = None


def rotation() -> Rotation:
    global _rotation
    if _rotation is None:
        _rotation = Rotation(os.environ.get(CANARY_URL_ENV) or None)
    return _rotation
