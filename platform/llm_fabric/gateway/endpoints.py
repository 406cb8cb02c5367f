"""Where one site's gateway sends a request: its engines, the other sites' gateways, the external providers.

Two ways to reach them, chosen once by the caller: `InCluster` (the rendered gateway: the deployment's
Service, or the inference Gateway, the URLs of fabric.yaml, the rendered counter store) and `LocalRun`
(`fabric gateway run` and the tests: only the engines, gateways and providers given are routed). Either
resolves to `SiteEndpoints`, which the routing (`gateway.routing`) reads and never asks which it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from llm_fabric.gateway.budgets import COUNTERS_NAME, COUNTERS_PORT
from llm_fabric.kube import labels as L
from llm_fabric.observability.canary import direct_service_name
from llm_fabric.plan.document import Plan
from llm_fabric.serving.workloads import site_surges, surge_name
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import ExternalProvider, GatewayConfig

ENGINE_SERVICE_PORT = 80  # the per-deployment Service (serving/workloads.py) and each replica's direct one


@dataclass(frozen=True)
class InCluster:
    """The rendered gateway: each replica of this site through its own direct Service (the canary's
    `REPLICA-direct`; a rollout's surge through the gateway's `DEPLOYMENT-surge-INDEX-direct`), so that the
    canary's rotation can take one replica out (issue 39, F7); with `routing: inference-extension` every
    deployment through the inference Gateway (its endpoint picker balances; the rotation does not reach
    single replicas there). The other sites' gateways at `gateway.sites.SITE.url`, the providers at their
    own URLs."""


@dataclass(frozen=True)
class LocalRun:
    """`fabric gateway run`: only what is given is routed, and no counter store is assumed.

    `engines` maps (deployment, this site or None) to an engine URL, `peers` a site to its gateway's URL,
    `externals` a provider of fabric.yaml to a local stand-in's URL (a provider not named is left out).
    `replicas` maps (deployment, index) to one of this site's replicas' own engine URL: such a replica gets
    an entry of its own (`model_info.fabric_replica`), which the canary's rotation can take out.
    `surges` maps (deployment, the index it stands in for) to a rollout's surge replica's own URL: it gets
    an entry beside them (`DEPLOYMENT/surge-INDEX`, never a replica's id).
    """

    engines: Mapping[tuple[str, str | None], str] = field(default_factory=dict)
    peers: Mapping[str, str] = field(default_factory=dict)
    externals: Mapping[str, str] = field(default_factory=dict)
    replicas: Mapping[tuple[str, int], str] = field(default_factory=dict)
    surges: Mapping[tuple[str, int], str] = field(default_factory=dict)


Reach = InCluster | LocalRun
IN_CLUSTER = InCluster()


@dataclass(frozen=True)
class Provider:
    """An external provider the gateway falls back to, at the URL it is reached at."""

    spec: ExternalProvider
    url: str


@dataclass(frozen=True)
class SiteEndpoints:
    """What the gateway at `site_id` reaches.

    `engines`: deployment -> URL of its replicas at this site (those it routes to); `peers`: another gateway
    site -> its gateway's URL; `out_of_reach`: another site -> why its replicas are not reached (a note; empty
    for a local run, which routes only what it was given); `counters_url`: the shared counter store.
    """

    site_id: str
    engines: dict[str, str]
    peers: dict[str, str]
    out_of_reach: dict[str, str]
    providers: dict[str, Provider]
    replicas: Mapping[tuple[str, int], str]
    surges: Mapping[tuple[str, int], str]
    counters_url: str | None


def resolve_endpoints(site: SiteRepo, plan: Plan, site_id: str, reach: Reach) -> SiteEndpoints:
    """The endpoints of the gateway at `site_id`, reached as `reach` says."""
    gw = site.config.gateway or GatewayConfig()
    gateways = [s for s in site.config.gateway_sites() if s != site_id]
    names = sorted(set(plan.deployments) | {r.deployment for r in plan.replicas})
    if isinstance(reach, LocalRun):
        engines = {d: url for d in names if (url := _local_engine(plan, site_id, reach, d)) is not None}
        return SiteEndpoints(
            site_id=site_id,
            engines=engines,
            peers={s: reach.peers[s] for s in gateways if s in reach.peers},
            out_of_reach={},
            providers={
                n: Provider(p, reach.externals[n]) for n, p in sorted(gw.external.items()) if n in reach.externals
            },
            replicas=reach.replicas,
            surges=reach.surges,
            # locally none unless the operator's: $FABRIC_GATEWAY_COUNTERS_URL names one, else the proxy counts alone
            counters_url=gw.counters.url if gw.counters is not None else None,
        )
    namespace = site.config.sites[site_id].cluster.namespace
    replicas: dict[tuple[str, int], str] = {}
    surges: dict[tuple[str, int], str] = {}
    if gw.routing == "inference-extension":
        engines = {d: gw.inference_gateway_url.format(namespace=namespace) for d in names}
    else:
        engines = {d: _service_url(d, namespace) for d in names}
        replicas = {
            (r.deployment, r.index): _service_url(direct_service_name(r.deployment, r.index), namespace)
            for r in plan.replicas
            if r.site == site_id
        }
        surges = {
            (s.placement.deployment, s.replaces): _service_url(
                surge_direct_service_name(s.placement.deployment, s.replaces), namespace
            )
            for s in site_surges(plan, site_id)
        }
    peers = {s: url for s in gateways if (url := site.config.gateway_url(s)) is not None}
    out_of_reach = {
        s: f"gateway.sites.{s}.url is not set" if s in gateways else f"`{s}` runs no gateway"
        for s in sorted(set(site.config.sites) | {r.site for r in plan.replicas})
        if s != site_id and s not in peers
    }
    return SiteEndpoints(
        site_id=site_id,
        engines=engines,
        peers=peers,
        out_of_reach=out_of_reach,
        providers={n: Provider(p, p.url) for n, p in sorted(gw.external.items())},
        replicas=replicas,
        surges=surges,
        counters_url=_cluster_counters(gw, namespace),
    )


def surge_direct_service_name(deployment: str, replaces: int) -> str:
    """The Service the gateway renders for a rollout's surge replica (gateway/objects/gateway.py): the
    canary probes no surge, so it renders none."""
    return L.dns_name(surge_name(deployment, replaces), "direct")


def _service_url(service: str, namespace: str) -> str:
    return f"http://{service}.{namespace}.svc.cluster.local:{ENGINE_SERVICE_PORT}/v1"


def _local_engine(plan: Plan, site_id: str, reach: LocalRun, deployment: str) -> str | None:
    """The engine given for `deployment` at this site, else its first replica's own; none: not routed."""
    own = [
        reach.replicas[(r.deployment, r.index)]
        for r in plan.replicas_of(deployment)
        if r.site == site_id and (r.deployment, r.index) in reach.replicas
    ]
    return (
        reach.engines.get((deployment, site_id)) or reach.engines.get((deployment, None)) or (own[0] if own else None)
    )


def _cluster_counters(gw: GatewayConfig, namespace: str) -> str | None:
    """The operator's Redis, else the one rendered at the site; none without `gateway.counters`."""
    if gw.counters is None:
        return None
    if gw.counters.url is not None:
        return gw.counters.url
    return f"redis://{COUNTERS_NAME}.{namespace}.svc.cluster.local:{COUNTERS_PORT}/0"
