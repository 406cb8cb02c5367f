"""`fabric gateway config`: one site's gateway, LiteLLM's config and the hook settings, from the site repo and the plan.

Every site that runs a gateway (`gateway.sites`, default every site) gets its own. It admits only the data
classes whose sovereignty rule allows its site. A model group per deployment and data class
(`DEPLOYMENT@CLASS`) holds that deployment's replicas at this site (its Service balances them, or with
`routing: inference-extension` the inference Gateway, told the deployment by a header); its fallbacks are
the other sites the class's rule allows, each reached through that site's gateway (a group
`DEPLOYMENT@CLASS~SITE`, never the site's engines), then, for a class whose rule allows external fallback,
the external providers that accept it. An entry's `max_parallel_requests` is its site's share of the
planned sessions. Tenants get an allowlist of groups (their classes x the deployments serving them).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llm_fabric import wording
from llm_fabric.engine.backends import backend
from llm_fabric.engine.recipes import DEFAULT_ENGINE, get_recipe
from llm_fabric.engine.request_hooks import request_fields
from llm_fabric.engine.vllm.command import request_defaults
from llm_fabric.errors import PolicyRefusal, Problem, UsageError
from llm_fabric.gateway.budgets import budget_share, store_settings, tenant_budget
from llm_fabric.gateway.fair_shares import with_fair_shares
from llm_fabric.gateway.runtime.frontdoor import PEER_KEY_ENV
from llm_fabric.gateway.runtime.inference import MODEL_HEADER
from llm_fabric.gateway.runtime.settings import (
    LITELLM_CONFIG_FILE,
    SETTINGS_FILE,
    DeploymentAccess,
    GroupAccess,
    HookSettings,
    TenantAccess,
)
from llm_fabric.plan.document import Plan, ReplicaPlacement, SurgeReplica, load_plan
from llm_fabric.policies.defaults import effective_policies
from llm_fabric.policies.sovereignty import external_fallback_allowed, prompt_logging_allowed, rule_refusals
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import GatewayConfig, PolicySet, Tenant
from llm_fabric.trust.sites import TrustedSite, load_trusted_site

HOOKS_MODULE = "llm_fabric.gateway.runtime.hooks"
ENGINE_SERVICE_PORT = 80  # the per-deployment Service (deploy/resources/serving.py)
# With routing `inference-extension` the gateway's own site is reached through the inference Gateway, whose
# HTTPRoutes match this header (GIE's body-based router would set it; LiteLLM sets it, so none is needed)


@dataclass
class GatewayFiles:
    litellm: dict[str, Any]
    settings: HookSettings
    notes: list[str] = field(default_factory=list)


def group_name(deployment: str, data_class: str) -> str:
    return f"{deployment}@{data_class}"


def external_group(provider: str) -> str:
    return f"external-{provider}"


def gateway_site(site: SiteRepo, asked: str | None) -> str:
    """The site whose gateway to build: `asked`, or the only one that runs a gateway."""
    running = site.config.gateway_sites()
    chosen = asked or (running[0] if len(running) == 1 else None)
    if chosen is None:
        raise UsageError(
            "every site runs its own gateway; say whose to build",
            hint=f"pass --site (one of {', '.join(running)})",
        )
    if chosen not in site.config.sites:
        raise UsageError(f"site `{chosen}` is not in fabric.yaml", hint=f"use one of {', '.join(site.config.sites)}")
    if chosen not in running:
        raise UsageError(
            f"site `{chosen}` runs no gateway (fabric.yaml gateway.sites lists {', '.join(running)})",
            hint=f"pass --site (one of {', '.join(running)}), or add `{chosen}` to gateway.sites",
        )
    return chosen


def _max_num_seqs(replica: ReplicaPlacement) -> int | None:
    args = replica.engine_args
    if "--max-num-seqs" in args:
        return int(args[args.index("--max-num-seqs") + 1])
    return None


def _served_name(replica: ReplicaPlacement) -> str:
    """The model name the engine answers to (the plan's --served-model-name: the deployment's name)."""
    args = replica.engine_args
    return args[args.index("--served-model-name") + 1] if "--served-model-name" in args else replica.deployment


def _ranked_classes(site: SiteRepo, tenant: Tenant) -> list[str]:
    ranks = {name: dc.rank for name, dc in site.config.data_classes.items()}
    return sorted(tenant.data_classes, key=lambda c: (-ranks.get(c, 0), c))


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


def _deployment_access(site: SiteRepo, plan: Plan, name: str, gw: GatewayConfig) -> DeploymentAccess:
    dep = site.deployments[name]
    cap = plan.deployments[name]
    replicas = plan.replicas_of(name)
    seqs = [_max_num_seqs(r) for r in replicas]
    ceiling = sum(s for s in seqs if s is not None) if all(s is not None for s in seqs) else None
    capacity = max(cap.max_concurrency_p50, 1)
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


def check_trusted_nodes(site: TrustedSite, replicas: list[ReplicaPlacement]) -> None:
    """Route only to replicas on active nodes the site repo holds, all of them trusted (PolicyRefusal otherwise).

    Trust was judged when the `TrustedSite` was loaded, the one gate plan, render and provision pass too. A
    retired node stays in the repo (its manifest says `retired`), but its machine is gone: a plan that
    still places a replica there is as stale as one that names a node the repo never had. A cordoned
    node still serves what it runs until the next plan is deployed, so it is not refused here.
    """
    trusted = site.nodes
    problems = []
    for r in replicas:
        node = trusted.get(r.node)
        if node is None or node.status == "retired":
            why = "which the site repo does not have" if node is None else "which is retired"
            problems.append(
                Problem(
                    f"replica {r.deployment}/{r.index} is placed on node `{r.node}`, {why}",
                    hint=f"the plan is older than the site repo: re-plan (`fabric plan -C {site.root} -o FILE`)",
                )
            )
    if problems:
        raise PolicyRefusal(
            f"the gateway would route to {wording.count(len(problems), 'replica')} on unknown or retired nodes",
            problems=problems,
        )


def check_one_fingerprint(plan: Plan) -> None:
    """Put only replicas with one configuration fingerprint behind one model name (PolicyRefusal otherwise).

    Replicas of one deployment configured differently (another context length, KV dtype, parser...)
    answer the same request differently with a 200 (seed 002): such a plan is refused, naming the
    replicas and the differing fields. A plan written before fingerprints carries none: with no
    fingerprint on any replica of a deployment there is nothing to compare.

    A rollout's surge replicas count as replicas of their deployment, and nothing else is accepted
    during a rollout: the plan is the merged revision's, so its replicas already carry the new
    fingerprint, and so does a surge (it runs the new configuration). The pods of the old fingerprint
    that still serve until their wave restarts them are not in the plan; they are the rollout's
    transition, bounded by its waves, not a configuration the gateway is given.
    """
    problems = []
    for name in sorted({r.deployment for r in plan.replicas}):
        members = [(member_id(r, False), r) for r in plan.replicas_of(name)]
        members += [(member_id(s.placement, True), s.placement) for s in plan_surges(plan, name)]
        groups: dict[str | None, list[str]] = {}
        for ident, r in members:
            groups.setdefault(r.config_fingerprint.sha256 if r.config_fingerprint else None, []).append(ident)
        if len(groups) < 2:
            continue
        first_id, first = members[0]
        by_id = dict(members)
        for key, idents in groups.items():
            if key == (first.config_fingerprint.sha256 if first.config_fingerprint else None):
                continue
            other = by_id[idents[0]]
            if first.config_fingerprint is None or other.config_fingerprint is None:
                fields = "one of them has no fingerprint (a plan written before fingerprints)"
            else:
                fields = (
                    f"{first.config_fingerprint.describe_differences(other.config_fingerprint)} "
                    f"(fingerprint {first.config_fingerprint.short} vs {other.config_fingerprint.short})"
                )
            problems.append(
                Problem(
                    f"deployment `{name}`: replica {first_id} and replica(s) {', '.join(idents)} are configured "
                    f"differently: {fields}",
                    hint=f"re-plan (`fabric plan -o FILE`) so every replica of `{name}` is served alike",
                )
            )
    if problems:
        raise PolicyRefusal(
            f"the gateway would put differently configured replicas behind one model name ({len(problems)})",
            problems=problems,
        )


def plan_surges(plan: Plan, deployment: str) -> list[SurgeReplica]:
    """The rollout's surge replicas of `deployment` (none without a rollout)."""
    rollouts = plan.rollout.deployments if plan.rollout is not None else []
    return [s for d in rollouts if d.deployment == deployment for s in d.surges]


def member_id(placement: ReplicaPlacement, surge: bool) -> str:
    """`DEPLOYMENT/INDEX`, a surge's `DEPLOYMENT/surge-INDEX` (the replica it stands in for): never a replica's."""
    return f"{placement.deployment}/{'surge-' if surge else ''}{placement.index}"


def _allowed_sites(site: SiteRepo, policies: PolicySet, data_class: str, sites: list[str]) -> list[str]:
    rule = policies.sovereignty.get(data_class)
    return [s for s in sites if not rule_refusals(data_class, rule, s, site.config.sites[s])]


def entry_classes(site: SiteRepo, policies: PolicySet, site_id: str) -> list[str]:
    """The data classes whose requests may enter (and be metered) at `site_id`'s gateway: its jurisdiction's."""
    return [c for c in site.config.data_classes if _allowed_sites(site, policies, c, [site_id])]


def gateway_for(
    site_repo: Path,
    plan_file: Path | None,
    site_name: str | None,
    *,
    endpoints: dict[tuple[str, str | None], str] | None = None,
    peers: dict[str, str] | None = None,
    externals: dict[str, str] | None = None,
    local: bool = False,
    replica_endpoints: dict[tuple[str, int], str] | None = None,
) -> GatewayFiles:
    """`fabric gateway config` and `run`: the trusted site (PolicyRefusal when a signature fails), its
    plan (`plan_file`, else planned now), the endpoints checked against it, and the gateway built."""
    site = load_trusted_site(site_repo)
    if plan_file is not None:
        plan = load_plan(plan_file)
    else:
        from llm_fabric.plan.planning import plan_site  # the solver loads only when a plan is made

        plan = plan_site(site)
    unknown = sorted({d for d, _ in (endpoints or {})} - set(plan.deployments))
    known = {(r.deployment, r.index) for r in plan.replicas}
    unknown += sorted(f"{d}/{i}" for d, i in (replica_endpoints or {}) if (d, i) not in known)
    if unknown:
        raise UsageError(
            f"--endpoint/--replica names deployment(s) or replica(s) the plan does not have: {', '.join(unknown)}",
            hint=f"planned: {', '.join(sorted(plan.deployments))}",
        )
    site_id = gateway_site(site, site_name)
    elsewhere = sorted({f"{d}@{at}" for d, at in (endpoints or {}) if at is not None and at != site_id})
    if elsewhere:
        raise UsageError(
            f"--endpoint {', '.join(elsewhere)}: a gateway reaches another site only through that site's gateway",
            hint="give the other site's gateway instead: --peer SITE=URL",
        )
    unknown_peers = sorted(set(peers or {}) - (set(site.config.gateway_sites()) - {site_id}))
    if unknown_peers:
        raise UsageError(
            f"--peer names site(s) that run no other gateway: {', '.join(unknown_peers)}",
            hint="sites with a gateway: " + ", ".join(s for s in site.config.gateway_sites() if s != site_id),
        )
    return build_gateway(
        site,
        plan.require_complete(),
        site_id=site_id,
        endpoints=endpoints,
        peers=peers,
        externals=externals,
        local=local,
        replica_endpoints=replica_endpoints,
    )


def relay_group(group: str, site: str) -> str:
    """The group of one other site's gateway, a fallback of `group` (`qwen3-5@public~vienna`)."""
    return f"{group}~{site}"


def build_gateway(
    site: TrustedSite,
    plan: Plan,
    *,
    site_id: str,
    endpoints: dict[tuple[str, str | None], str] | None = None,
    peers: dict[str, str] | None = None,
    externals: dict[str, str] | None = None,
    local: bool = False,
    replica_endpoints: dict[tuple[str, int], str] | None = None,
    surge_endpoints: dict[tuple[str, int], str] | None = None,
) -> GatewayFiles:
    """The gateway of site `site_id`.

    It admits only the data classes its site's jurisdiction allows; a group `DEPLOYMENT@CLASS` holds this
    site's replicas, and falls back, in site order, to the other sites the class's rule allows (each through
    its gateway, `gateway.sites.SITE.url`: never their engines), then to the external providers that take it.
    A deployment with no replica here is served by the first such site, the others its fallbacks.
    `endpoints` maps (deployment, this site or None) to an engine URL and `peers` a site to its gateway's URL
    (`fabric gateway run`); with `local`, only those are listed and `externals` (provider -> URL) replaces
    the providers' URLs.
    `replica_endpoints` maps (deployment, index) to one of this site's replicas' own engine URL: such a
    replica gets an entry of its own (`model_info.fabric_replica`), which the canary's rotation can take out.
    `surge_endpoints` maps (deployment, the index it stands in for) to a rollout's surge replica's own URL: it
    gets an entry beside them (`DEPLOYMENT/surge-INDEX`, never a replica's id). Rendered, the gateway routes
    through the deployment's Service, which selects the surge's pods as it does the replicas'.
    """
    gw = site.config.gateway or GatewayConfig()
    policies = effective_policies(site)
    overrides = endpoints or {}
    namespace = site.config.sites[site_id].cluster.namespace
    notes: list[str] = []
    model_list: list[dict[str, Any]] = []
    groups: dict[str, GroupAccess] = {}
    deployments: dict[str, DeploymentAccess] = {}
    timeout = gw.request_timeout_s
    inference = gw.routing == "inference-extension"
    admitted = entry_classes(site, policies, site_id)
    gateways = [s for s in site.config.gateway_sites() if s != site_id]

    by_replica = replica_endpoints or {}
    by_surge = surge_endpoints or {}

    def local_endpoint(dep: str) -> str | None:
        own = [
            by_replica[(r.deployment, r.index)]
            for r in plan.replicas_of(dep)
            if r.site == site_id and (r.deployment, r.index) in by_replica
        ]
        url = overrides.get((dep, site_id)) or overrides.get((dep, None)) or (own[0] if own else None)
        if url is not None or local:
            return url
        if inference:
            return gw.inference_gateway_url.format(namespace=namespace)
        return f"http://{dep}.{namespace}.svc.cluster.local:{ENGINE_SERVICE_PORT}/v1"

    def peer(at: str) -> str | None:
        if at not in gateways:
            return None
        if local:
            return (peers or {}).get(at)
        return (peers or {}).get(at) or site.config.gateway_url(at)

    providers = {
        name: p for name, p in sorted(gw.external.items()) if not local or (externals is not None and name in externals)
    }
    for name, provider in providers.items():
        url = (externals or {}).get(name, provider.url) if local else provider.url
        params: dict[str, Any] = {"model": f"openai/{provider.model}", "api_base": url, "timeout": timeout}
        params["api_key"] = f"os.environ/{provider.api_key_env}" if provider.api_key_env else "none"
        model_list.append(
            {
                "model_name": external_group(name),
                "litellm_params": params,
                "model_info": {"id": external_group(name), "fabric_external": name},
            }
        )

    here = [r for r in plan.replicas if r.site == site_id and local_endpoint(r.deployment) is not None]
    check_trusted_nodes(site, here)
    check_one_fingerprint(plan)
    for dropped in [c for c in site.config.data_classes if c not in admitted]:
        notes.append(f"`{dropped}` data does not enter at {site_id}: its sovereignty rule does not allow the site")
    for name in sorted(plan.deployments):
        replicas = plan.replicas_of(name)
        if name not in site.deployments or not replicas:
            continue
        access = _deployment_access(site, plan, name, gw)
        per_site = Counter(r.site for r in replicas)
        reachable: dict[str, str] = {}
        if site_id in per_site and (own := local_endpoint(name)) is not None:
            reachable[site_id] = own
        for other in sorted(set(per_site) - {site_id}):
            if (found := peer(other)) is not None:
                reachable[other] = found
            elif not local:
                notes.append(
                    f"{name}: its replicas at `{other}` are out of reach: "
                    + (f"gateway.sites.{other}.url is not set" if other in gateways else f"`{other}` runs no gateway")
                )
        if not reachable:
            continue
        deployments[name] = access
        total = sum(per_site.values())
        for data_class in site.deployments[name].data_classes:
            if data_class not in admitted:
                continue
            sites = _allowed_sites(site, policies, data_class, list(reachable))
            if not sites:
                notes.append(f"{name}: no replica it may reach holds `{data_class}` data under its sovereignty rule")
                continue
            group = group_name(name, data_class)
            externals_for: list[str] = []
            if external_fallback_allowed(policies, [data_class]):
                externals_for = [
                    external_group(p)
                    for p, spec in providers.items()
                    if data_class in spec.data_classes and (not spec.deployments or name in spec.deployments)
                ]
            first, others = sites[0], sites[1:]
            chain = [relay_group(group, s) for s in others]
            groups[group] = GroupAccess(
                deployment=name, data_class=data_class, sites=[first], fallbacks=chain + externals_for
            )
            for s in others:
                groups[relay_group(group, s)] = GroupAccess(deployment=name, data_class=data_class, sites=[s])
            for s in sites:
                slots = max(math.floor(access.capacity * per_site[s] / total), 1)
                if s == site_id:
                    params = {
                        "model": f"hosted_vllm/{_served_name(replicas[0])}",
                        "api_base": reachable[s],
                        "api_key": "none",
                        "timeout": timeout,
                        "max_parallel_requests": slots,
                    }
                    info: dict[str, Any] = {"id": f"{group}/{s}", "fabric_site": s, "fabric_deployment": name}
                    if inference:
                        params["extra_headers"] = {MODEL_HEADER: name}
                        # the hooks add the tenant (fairness id) and its band's objective per request
                        info["fabric_inference"] = True
                else:
                    # the other site's gateway, asked for the same group: it serves the request from its own replicas
                    params = {
                        "model": f"hosted_vllm/{group}",
                        "api_base": reachable[s],
                        "api_key": f"os.environ/{PEER_KEY_ENV}",
                        "timeout": timeout,
                        "max_parallel_requests": slots,
                    }
                    info = {"id": f"{group}/{s}", "fabric_site": s, "fabric_deployment": name, "fabric_relay": s}
                model_name = group if s == first else relay_group(group, s)
                own_entries = (
                    _replica_entries(model_name, params, info, plan, name, s, by_replica, by_surge)
                    if s == site_id
                    else []
                )
                model_list += own_entries or [{"model_name": model_name, "litellm_params": params, "model_info": info}]

    tenants: dict[str, TenantAccess] = {}
    admits = {s: set(entry_classes(site, policies, s)) for s in site.config.gateway_sites()}
    for tname, tenant in sorted(site.tenants.items()):
        share = budget_share(site, site_id, [s for s, classes in admits.items() if classes & set(tenant.data_classes)])
        allow: dict[str, dict[str, str]] = {}
        for group, spec in groups.items():
            if spec.data_class in tenant.data_classes and group == group_name(spec.deployment, spec.data_class):
                allow.setdefault(spec.deployment, {})[spec.data_class] = group
        lim = tenant.limits
        tenants[tname] = TenantAccess(
            key_sha256=[k.sha256 for k in tenant.keys],
            data_classes=_ranked_classes(site, tenant),
            requests_per_minute=lim.requests_per_minute,
            input_tokens_per_minute=lim.input_tokens_per_minute,
            output_tokens_per_minute=lim.output_tokens_per_minute,
            max_concurrent_requests=lim.max_concurrent_requests,
            groups=allow,
            **tenant_budget(site, policies, tenant, share),
        )
        if not tenant.keys:
            notes.append(f"tenant `{tname}` has no key: `fabric tenants key issue {tname} -C {site.root}`")

    deployments = with_fair_shares(deployments, tenants)
    settings = HookSettings(
        federation=site.config.federation.name,
        retry_after_s=gw.retry_after_s,
        log_prompts={c: gw.log_prompts and prompt_logging_allowed(policies, [c]) for c in site.config.data_classes},
        tenants=tenants,
        deployments=deployments,
        groups=groups,
        external=[external_group(p) for p in providers],
        site=site_id,
        entry_sites={
            c: [s for s in site.config.gateway_sites() if c in entry_classes(site, policies, s)]
            for c in site.config.data_classes
        },
        **store_settings(site, site_id, local=local),
    )
    fallbacks: list[dict[str, list[str]]] = [
        {g: spec.fallbacks} for g, spec in sorted(groups.items()) if spec.fallbacks
    ]
    litellm: dict[str, Any] = {
        "model_list": model_list,
        "router_settings": {
            "routing_strategy": "least-busy",
            "num_retries": 0,
            "fallbacks": fallbacks,
            "timeout": timeout,
        },
        "litellm_settings": {
            "callbacks": [f"{HOOKS_MODULE}.fabric_hooks", "prometheus"],
            "request_timeout": timeout,
            # LiteLLM's own spend/message logs would hold prompts: the meter decides what is recorded
            "turn_off_message_logging": True,
        },
        "general_settings": {
            "custom_auth": f"{HOOKS_MODULE}.user_api_key_auth",
            "master_key": "os.environ/LITELLM_MASTER_KEY",
        },
    }
    return GatewayFiles(litellm=litellm, settings=settings, notes=notes)


def _replica_entries(
    group: str,
    params: dict[str, Any],
    info: dict[str, Any],
    plan: Plan,
    deployment: str,
    at: str,
    by_replica: dict[tuple[str, int], str],
    by_surge: dict[tuple[str, int], str],
) -> list[dict[str, Any]]:
    """One entry per replica at `at` that has its own endpoint (the canary's rotation takes such an entry out),
    and one per surge replica with its own endpoint (the canary knows no surge: its rotation leaves it in)."""
    own = [
        (member_id(r, False), by_replica[(r.deployment, r.index)])
        for r in plan.replicas_of(deployment)
        if r.site == at and (r.deployment, r.index) in by_replica
    ]
    own += [
        (member_id(s.placement, True), by_surge[(deployment, s.replaces)])
        for s in plan_surges(plan, deployment)
        if s.placement.site == at and (deployment, s.replaces) in by_surge
    ]
    share = max(math.floor(int(params["max_parallel_requests"]) / max(len(own), 1)), 1)
    return [
        {
            "model_name": group,
            "litellm_params": params | {"api_base": url, "max_parallel_requests": share},
            "model_info": info | {"id": f"{group}/{at}/{ident.split('/', 1)[1]}", "fabric_replica": ident},
        }
        for ident, url in own
    ]


def gateway_texts(files: GatewayFiles, *, with_keys: bool = True) -> dict[str, str]:
    """The two files the proxy reads, as text; without the key hashes for a ConfigMap (they go in a Secret)."""
    settings = files.settings if with_keys else files.settings.without_keys()
    header = "# Generated by `fabric gateway config` from the site repo and the plan; do not edit.\n"
    return {
        LITELLM_CONFIG_FILE: header + yaml.safe_dump(files.litellm, sort_keys=False),
        SETTINGS_FILE: json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True) + "\n",
    }
