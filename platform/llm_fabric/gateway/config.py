"""`fabric gateway config`: one site's gateway, LiteLLM's config and the hook settings, from the site repo and the plan.

Every site that runs a gateway (`gateway.sites`, default every site) gets its own. It admits only the data
classes whose sovereignty rule allows its site. A model group per deployment and data class
(`DEPLOYMENT@CLASS`) holds that deployment's replicas at this site (an entry per replica, each through its
own direct Service, which the canary's rotation can take out; with `routing: inference-extension` one entry
to the inference Gateway, told the deployment by a header); its fallbacks are
the other sites the class's rule allows, each reached through that site's gateway (a group
`DEPLOYMENT@CLASS~SITE`, never the site's engines), then, for a class whose rule allows external fallback,
the external providers that accept it. An entry's `max_parallel_requests` is its site's share of the
planned sessions. Tenants get an allowlist of groups (their classes x the deployments serving them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llm_fabric.errors import UsageError
from llm_fabric.gateway.access import tenant_access
from llm_fabric.gateway.budgets import store_settings
from llm_fabric.gateway.endpoints import IN_CLUSTER, LocalRun, Reach, resolve_endpoints
from llm_fabric.gateway.fair_shares import with_fair_shares
from llm_fabric.gateway.plan_checks import check_one_fingerprint, check_trusted_nodes
from llm_fabric.gateway.routing import Routing, entry_classes, route
from llm_fabric.gateway.runtime.settings import LITELLM_CONFIG_FILE, SETTINGS_FILE, HookSettings
from llm_fabric.plan.document import Plan, load_plan
from llm_fabric.policies.defaults import effective_policies
from llm_fabric.policies.sovereignty import prompt_logging_allowed
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import GatewayConfig
from llm_fabric.trust.sites import TrustedSite, load_trusted_site

HOOKS_MODULE = "llm_fabric.gateway.runtime.hooks"


@dataclass
class GatewayFiles:
    litellm: dict[str, Any]
    settings: HookSettings
    notes: list[str] = field(default_factory=list)


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


def gateway_for(
    site_repo: Path, plan_file: Path | None, site_name: str | None, reach: Reach = IN_CLUSTER
) -> GatewayFiles:
    """`fabric gateway config` and `run`: the trusted site (PolicyRefusal when a signature fails), its
    plan (`plan_file`, else planned now), a local run's endpoints checked against it, and the gateway built."""
    site = load_trusted_site(site_repo)
    if plan_file is not None:
        plan = load_plan(plan_file)
    else:
        from llm_fabric.plan.planning import plan_site  # the solver loads only when a plan is made

        plan = plan_site(site)
    given = reach if isinstance(reach, LocalRun) else LocalRun()  # rendered: nothing given to check
    unknown = sorted({d for d, _ in given.engines} - set(plan.deployments))
    known = {(r.deployment, r.index) for r in plan.replicas}
    unknown += sorted(f"{d}/{i}" for d, i in given.replicas if (d, i) not in known)
    if unknown:
        raise UsageError(
            f"--endpoint/--replica names deployment(s) or replica(s) the plan does not have: {', '.join(unknown)}",
            hint=f"planned: {', '.join(sorted(plan.deployments))}",
        )
    site_id = gateway_site(site, site_name)
    elsewhere = sorted({f"{d}@{at}" for d, at in given.engines if at is not None and at != site_id})
    if elsewhere:
        raise UsageError(
            f"--endpoint {', '.join(elsewhere)}: a gateway reaches another site only through that site's gateway",
            hint="give the other site's gateway instead: --peer SITE=URL",
        )
    unknown_peers = sorted(set(given.peers) - (set(site.config.gateway_sites()) - {site_id}))
    if unknown_peers:
        raise UsageError(
            f"--peer names site(s) that run no other gateway: {', '.join(unknown_peers)}",
            hint="sites with a gateway: " + ", ".join(s for s in site.config.gateway_sites() if s != site_id),
        )
    return build_gateway(site, plan.require_complete(), site_id=site_id, reach=reach)


def build_gateway(site: TrustedSite, plan: Plan, *, site_id: str, reach: Reach = IN_CLUSTER) -> GatewayFiles:
    """The gateway of site `site_id`, reached as `reach` says (`gateway.endpoints`: rendered, or a local run).

    It admits only the data classes its site's jurisdiction allows; its endpoints (which engines and gateways it
    reaches), its routing (model groups, fallbacks, capacities: `gateway.routing`) and its access (tenants,
    key hashes, limits, allowed groups: `gateway.access`) are built in that order, each from the one before.
    Rendered, the gateway routes to each replica's and each surge's own direct Service (`gateway.endpoints`).
    """
    policies = effective_policies(site)
    endpoints = resolve_endpoints(site, plan, site_id, reach)
    check_trusted_nodes(site, [r for r in plan.replicas if r.site == site_id and r.deployment in endpoints.engines])
    check_one_fingerprint(plan)
    routing = route(site, plan, policies, endpoints)
    access = tenant_access(site, policies, site_id, routing.groups)
    gw = site.config.gateway or GatewayConfig()
    store = store_settings(site, endpoints.counters_url)
    settings = HookSettings(
        federation=site.config.federation.name,
        retry_after_s=gw.retry_after_s,
        log_prompts={c: gw.log_prompts and prompt_logging_allowed(policies, [c]) for c in site.config.data_classes},
        tenants=access.tenants,
        deployments=with_fair_shares(routing.deployments, access.tenants),
        groups=routing.groups,
        external=routing.external,
        site=site_id,
        entry_sites={
            c: [s for s in site.config.gateway_sites() if c in entry_classes(site, policies, s)]
            for c in site.config.data_classes
        },
        counters=store.counters,
        currency=store.currency,
        prices=store.prices,
        stale_after_s=store.stale_after_s,
    )
    return GatewayFiles(
        litellm=litellm_config(routing, gw.request_timeout_s), settings=settings, notes=routing.notes + access.notes
    )


def litellm_config(routing: Routing, timeout: float) -> dict[str, Any]:
    """LiteLLM's config: the routing's entries and fallbacks, the hooks as its auth and callbacks."""
    fallbacks: list[dict[str, list[str]]] = [
        {g: spec.fallbacks} for g, spec in sorted(routing.groups.items()) if spec.fallbacks
    ]
    return {
        "model_list": routing.model_list,
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


def gateway_texts(files: GatewayFiles, *, with_keys: bool = True) -> dict[str, str]:
    """The two files the proxy reads, as text; without the key hashes for a ConfigMap (they go in a Secret)."""
    settings = files.settings if with_keys else files.settings.without_keys()
    header = "# Generated by `fabric gateway config` from the site repo and the plan; do not edit.\n"
    return {
        LITELLM_CONFIG_FILE: header + yaml.safe_dump(files.litellm, sort_keys=False),
        SETTINGS_FILE: json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True) + "\n",
    }
