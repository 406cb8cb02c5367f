"""`fabric validate` checks of the gateway's part of the site repo.

- an external provider that takes a data class whose sovereignty rule forbids external fallback is a
  policy violation (exit 3): the gateway would never send that class there, and the file says it may;
- one key hash under two tenants is a config problem (exit 2): the gateway could not tell them apart;
- a data class with no gateway at a site its sovereignty rule allows is a policy violation (exit 3): its
  requests would have to enter, and be metered, in a jurisdiction the rule keeps them out of;
- a file of keys/gateway-relay/ that is not SITE.pub of a site of fabric.yaml holding an Ed25519 public key
  is a config problem (exit 2): the rendered gateways would believe relays by it (gateway/relay_keys.py);
  the key of a site that runs no gateway is a warning (it is not rendered).
"""

from __future__ import annotations

from llm_fabric.gateway.relay_keys import read_relay_keys
from llm_fabric.policies.defaults import effective_policies
from llm_fabric.policies.sovereignty import rule_refusals
from llm_fabric.site.loader import FABRIC_FILE, SiteRepo
from llm_fabric.site.validation import Finding, SiteCheck


def check_external_providers(site: SiteRepo) -> list[Finding]:
    gw = site.config.gateway
    if gw is None:
        return []
    policies = effective_policies(site)
    findings = []
    for name, provider in sorted(gw.external.items()):
        for index, data_class in enumerate(provider.data_classes):
            rule = policies.sovereignty.get(data_class)
            if rule is not None and rule.external_fallback:
                continue
            loc = ("gateway", "external", name, "data_classes", index)
            message = f"external provider `{name}` takes `{data_class}` data, whose policy forbids external fallback"
            hint = f"remove `{data_class}` from gateway.external.{name}.data_classes, or allow it in policies/"
            findings.append(Finding("policy", site.problem(site.root / FABRIC_FILE, loc, message, hint)))
    return findings


def check_key_hashes(site: SiteRepo) -> list[Finding]:
    owner: dict[str, str] = {}
    findings = []
    for tenant_name, tenant in sorted(site.tenants.items()):
        for index, key in enumerate(tenant.keys):
            first = owner.setdefault(key.sha256, tenant_name)
            if first != tenant_name:
                message = f"key {key.id} is also a key of tenant `{first}`"
                hint = f"revoke it from one of them: `fabric tenants key revoke {tenant_name} {key.id} -C {site.root}`"
                path = site.path_of("tenants", tenant_name)
                findings.append(Finding("config", site.problem(path, ("keys", index, "sha256"), message, hint)))
    return findings


def check_entry_gateways(site: SiteRepo) -> list[Finding]:
    """Every data class can enter the federation at a gateway in a jurisdiction its rule allows."""
    policies = effective_policies(site)
    running = site.config.gateway_sites()
    listed = bool(site.config.gateway is not None and site.config.gateway.sites)
    findings = []
    for data_class in sorted(site.config.data_classes):
        rule = policies.sovereignty.get(data_class)
        allowed = [s for s, spec in site.config.sites.items() if not rule_refusals(data_class, rule, s, spec)]
        if any(s in running for s in allowed):
            continue
        why = "; ".join(rule_refusals(data_class, rule, running[0], site.config.sites[running[0]])) if running else ""
        message = (
            f"no gateway may take `{data_class}` data: it runs at {', '.join(running)}, where its sovereignty rule "
            f"keeps that data out ({why})"
        )
        if allowed:
            hint = f"run a gateway at {' or '.join(allowed)}: add `{allowed[0]}:` under gateway.sites, with its url"
        else:
            hint = f"no site of fabric.yaml may process `{data_class}` data: relax its rule in policies/ or add a site"
        loc = ("gateway", "sites") if listed else ("sites",)
        findings.append(Finding("policy", site.problem(site.root / FABRIC_FILE, loc, message, hint)))
    return findings


def check_relay_keys(site: SiteRepo) -> list[Finding]:
    return read_relay_keys(site)[1]


site_checks: list[SiteCheck] = [check_external_providers, check_key_hashes, check_entry_gateways, check_relay_keys]
