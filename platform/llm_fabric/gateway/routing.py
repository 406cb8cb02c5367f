"""The gateway's routing: a model group per deployment and data class, its fallbacks, each deployment's capacity.

A group `DEPLOYMENT@CLASS` holds this site's replicas (or, with none here, the first other site's the class's
rule allows) and falls back, in site order, to the other such sites, each through its gateway (a group
`DEPLOYMENT@CLASS~SITE`), then to the external providers that take the class. An entry's
`max_parallel_requests` is its site's share of the planned sessions. The endpoints come resolved
(`gateway.endpoints`); who may use a group is the access's (`gateway.access`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from llm_fabric import names as N
from llm_fabric.engine.backends import backend
from llm_fabric.engine.command import request_defaults
from llm_fabric.engine.recipes import DEFAULT_ENGINE, get_recipe
from llm_fabric.engine.request_hooks import request_fields
from llm_fabric.gateway.endpoints import Provider, SiteEndpoints
from llm_fabric.gateway.plan_checks import member_id, plan_surges
from llm_fabric.gateway.runtime.frontdoor import PEER_KEY_ENV
from llm_fabric.gateway.runtime.inference import MODEL_HEADER
from llm_fabric.gateway.runtime.settings import DeploymentAccess, GroupAccess
from llm_fabric.plan.document import Plan, ReplicaPlacement
from llm_fabric.policies.sovereignty import external_fallback_allowed, rule_refusals
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import GatewayConfig, PolicySet

Entry = dict[str, Any]  # one of LiteLLM's `model_list` entries, in its own schema


@dataclass(frozen=True)
class Routing:
    """LiteLLM's entries (the external providers first), the groups, each routed deployment's capacity (its
    fair shares are the access's to complete: `with_fair_shares`) and the notes on what is not routed."""

    model_list: list[Entry]
    groups: dict[str, GroupAccess]
    deployments: dict[str, DeploymentAccess]
    external: list[str]
    notes: list[str]


@dataclass(frozen=True)
class _Deployment:
    """One routed deployment: its replicas (all sites), per site, and where each reached site is."""

    name: str
    access: DeploymentAccess
    replicas: list[ReplicaPlacement]
    per_site: Counter[str]
    reachable: dict[str, str]


def group_name(deployment: str, data_class: str) -> str:
    return f"{deployment}@{data_class}"


def external_group(provider: str) -> str:
    return f"external-{provider}"


def relay_group(group: str, site: str) -> str:
    """The group of one other site's gateway, a fallback of `group` (`qwen3-5@public~vienna`)."""
    return f"{group}~{site}"


def allowed_sites(site: SiteRepo, policies: PolicySet, data_class: str, sites: list[str]) -> list[str]:
    rule = policies.sovereignty.get(data_class)
    return [s for s in sites if not rule_refusals(data_class, rule, s, site.config.sites[s])]


def entry_classes(site: SiteRepo, policies: PolicySet, site_id: str) -> list[str]:
    """The data classes whose requests may enter (and be metered) at `site_id`'s gateway: its jurisdiction's."""
    return [c for c in site.config.data_classes if allowed_sites(site, policies, c, [site_id])]


def route(site: SiteRepo, plan: Plan, policies: PolicySet, endpoints: SiteEndpoints) -> Routing:
    """The routing of the gateway at `endpoints.site_id`: every deployment it reaches, per admitted class."""
    site_id = endpoints.site_id
    timeout = (site.config.gateway or GatewayConfig()).request_timeout_s
    model_list = [_external_entry(name, p, timeout) for name, p in endpoints.providers.items()]
    admitted = entry_classes(site, policies, site_id)
    notes = [
        f"`{dropped}` data does not enter at {site_id}: its sovereignty rule does not allow the site"
        for dropped in site.config.data_classes
        if dropped not in admitted
    ]
    groups: dict[str, GroupAccess] = {}
    deployments: dict[str, DeploymentAccess] = {}
    for name in sorted(plan.deployments):
        dep = _routed(site, plan, name, endpoints, notes)
        if dep is None:
            continue
        deployments[name] = dep.access
        for data_class in site.deployments[name].data_classes:
            if data_class not in admitted:
                continue
            sites = allowed_sites(site, policies, data_class, list(dep.reachable))
            if not sites:
                notes.append(f"{name}: no replica it may reach holds `{data_class}` data under its sovereignty rule")
                continue
            group = group_name(name, data_class)
            fallbacks = [relay_group(group, s) for s in sites[1:]]
            if external_fallback_allowed(policies, [data_class]):
                fallbacks += [
                    external_group(p)
                    for p, provider in endpoints.providers.items()
                    if data_class in provider.spec.data_classes
                    and (not provider.spec.deployments or name in provider.spec.deployments)
                ]
            groups[group] = GroupAccess(deployment=name, data_class=data_class, sites=[sites[0]], fallbacks=fallbacks)
            for s in sites[1:]:
                groups[relay_group(group, s)] = GroupAccess(deployment=name, data_class=data_class, sites=[s])
            model_list += _group_entries(site, plan, dep, group, sites, endpoints, timeout)
    return Routing(
        model_list=model_list,
        groups=groups,
        deployments=deployments,
        external=[external_group(p) for p in endpoints.providers],
        notes=notes,
    )


def _external_entry(name: str, provider: Provider, timeout: float) -> Entry:
    params: dict[str, Any] = {"model": f"openai/{provider.spec.model}", "api_base": provider.url, "timeout": timeout}
    params["api_key"] = f"os.environ/{provider.spec.api_key_env}" if provider.spec.api_key_env else "none"
    return {
        "model_name": external_group(name),
        "litellm_params": params,
        "model_info": {"id": external_group(name), N.MODEL_INFO_EXTERNAL: name},
    }


def _routed(site: SiteRepo, plan: Plan, name: str, endpoints: SiteEndpoints, notes: list[str]) -> _Deployment | None:
    """The deployment `name` as routed from this site: none when the site repo lacks it, it has no replica,
    or no replica of it is reached (a note says why, for another site the gateway cannot reach)."""
    replicas = plan.replicas_of(name)
    if name not in site.deployments or not replicas:
        return None
    access = deployment_access(site, plan, name)
    per_site = Counter(r.site for r in replicas)
    reachable: dict[str, str] = {}
    site_id = endpoints.site_id
    if site_id in per_site and (own := endpoints.engines.get(name)) is not None:
        reachable[site_id] = own
    for other in sorted(set(per_site) - {site_id}):
        if (found := endpoints.peers.get(other)) is not None:
            reachable[other] = found
        elif (why := endpoints.out_of_reach.get(other)) is not None:
            notes.append(f"{name}: its replicas at `{other}` are out of reach: {why}")
    if not reachable:
        return None
    return _Deployment(name, access, replicas, per_site, reachable)


def _group_entries(
    site: SiteRepo,
    plan: Plan,
    dep: _Deployment,
    group: str,
    sites: list[str],
    endpoints: SiteEndpoints,
    timeout: float,
) -> list[Entry]:
    """The entries of `group` and its relay groups: this site's replicas (one entry, or one per replica with its
    own endpoint) and each other site's gateway, each its site's share of the deployment's capacity."""
    inference = (site.config.gateway or GatewayConfig()).routing == "inference-extension"
    total = sum(dep.per_site.values())
    entries: list[Entry] = []
    for s in sites:
        slots = max(math.floor(dep.access.capacity * dep.per_site[s] / total), 1)
        info: dict[str, Any] = {"id": f"{group}/{s}", N.MODEL_INFO_SITE: s, N.MODEL_INFO_DEPLOYMENT: dep.name}
        model_name = group if s == sites[0] else relay_group(group, s)
        if s != endpoints.site_id:
            # the other site's gateway, asked for the same group: it serves the request from its own replicas
            params: dict[str, Any] = {
                "model": f"hosted_vllm/{group}",
                "api_base": dep.reachable[s],
                "api_key": f"os.environ/{PEER_KEY_ENV}",
                "timeout": timeout,
                "max_parallel_requests": slots,
            }
            entries.append(
                {"model_name": model_name, "litellm_params": params, "model_info": info | {N.MODEL_INFO_RELAY: s}}
            )
            continue
        params = {
            "model": f"hosted_vllm/{dep.replicas[0].served_model_name}",
            "api_base": dep.reachable[s],
            "api_key": "none",
            "timeout": timeout,
            "max_parallel_requests": slots,
        }
        if inference:
            params["extra_headers"] = {MODEL_HEADER: dep.name}
            # the hooks add the tenant (fairness id) and its band's objective per request
            info[N.MODEL_INFO_INFERENCE] = True
        own = _replica_entries(model_name, params, info, plan, dep.name, endpoints)
        entries += own or [{"model_name": model_name, "litellm_params": params, "model_info": info}]
    return entries


def _replica_entries(
    group: str, params: dict[str, Any], info: dict[str, Any], plan: Plan, deployment: str, endpoints: SiteEndpoints
) -> list[Entry]:
    """One entry per replica at this site that has its own endpoint (the canary's rotation takes such an entry
    out), and one per surge replica with its own endpoint (the canary knows no surge: its rotation leaves it in)."""
    at = endpoints.site_id
    own = [
        (member_id(r, False), endpoints.replicas[(r.deployment, r.index)])
        for r in plan.replicas_of(deployment)
        if r.site == at and (r.deployment, r.index) in endpoints.replicas
    ]
    own += [
        (member_id(s.placement, True), endpoints.surges[(deployment, s.replaces)])
        for s in plan_surges(plan, deployment)
        if s.placement.site == at and (deployment, s.replaces) in endpoints.surges
    ]
    share = max(math.floor(int(params["max_parallel_requests"]) / max(len(own), 1)), 1)
    return [
        {
            "model_name": group,
            "litellm_params": params | {"api_base": url, "max_parallel_requests": share},
            "model_info": info | {"id": f"{group}/{at}/{ident.split('/', 1)[1]}", N.MODEL_INFO_REPLICA: ident},
        }
        for ident, url in own
    ]


def _max_num_seqs(replica: ReplicaPlacement) -> int | None:
    args = replica.engine_args
    if "--max-num-seqs" in args:
        return int(args[args.index("--max-num-seqs") + 1])
    return None


def _owner(site: SiteRepo, deployment: str, dedicated_for: str | None) -> tuple[str | None, int, bool]:
    """(owner, replicas reserved for it, whether it lends idle capacity)."""
    if dedicated_for is not None:
        tenant = site.tenants.get(dedicated_for)
        lend = tenant.dedicated.lend_surplus if tenant is not None and tenant.dedicated is not None else True
        return dedicated_for, -1, lend  # -1: every replica
    for name, tenant in sorted(site.tenants.items()):
        if tenant.dedicated is not None and tenant.dedicated.replicas.get(deployment, 0) > 0:
            return name, tenant.dedicated.replicas[deployment], tenant.dedicated.lend_surplus
    return None, 0, True


def deployment_access(site: SiteRepo, plan: Plan, name: str) -> DeploymentAccess:
    """The deployment's capacity (planned sessions, capped by its replicas' --max-num-seqs), its owner's
    reserve and allocation, and what the gateway adds to its requests."""
    gw = site.config.gateway or GatewayConfig()
    dep = site.deployments[name]
    replicas = plan.replicas_of(name)
    seqs = [_max_num_seqs(r) for r in replicas]
    ceiling = sum(s for s in seqs if s is not None) if all(s is not None for s in seqs) else None
    capacity = max(plan.deployments[name].max_concurrency_p50, 1)
    if ceiling is not None:
        capacity = min(capacity, ceiling)
    owner, owned, lend = _owner(site, name, dep.dedicated_for)
    reserved = 0
    allocation: dict[str, float] = {}
    lent = False
    if owner is not None:
        share = capacity if owned < 0 else capacity * min(owned, len(replicas)) / max(len(replicas), 1)
        reserved = math.ceil(share * (gw.owner_reserve if lend else 1.0))
        # the owner's allocation: its dedicated replicas' slots, or of a deployment all its own that it
        # lends, the reserve it keeps (the rest is lent: `with_fair_shares` splits it among the others)
        lent = lend and (owned < 0 or owned >= len(replicas))
        allocation[owner] = float(min(reserved, capacity) if lent else share)
    recipe = get_recipe(dep.recipe)
    engine = replicas[0].engine if replicas else DEFAULT_ENGINE
    chosen = backend(engine)
    priority = bool(replicas) and all(chosen.priority_scheduling(r.engine_args) for r in replicas)
    low_first = all(chosen.low_values_first(r.engine_args) for r in replicas)

    def fields(is_owner: bool) -> dict[str, Any]:
        # the priority only where every replica schedules by it: vLLM rejects one it cannot honour
        return request_fields(engine, owner=is_owner if priority else None, low_values_first=low_first)

    return DeploymentAccess(
        capacity=capacity,
        owner=owner,
        owner_reserved=min(reserved, capacity),
        fair_shares=allocation,
        lent=lent,
        engine=engine,
        priority_scheduling=priority,
        owner_fields=fields(True),
        pool_fields=fields(False),
        request_defaults=request_defaults(
            recipe, max_output_tokens=dep.generation.max_output_tokens, presence_penalty=dep.generation.presence_penalty
        ),
    )
