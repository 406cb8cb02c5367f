"""`fabric validate` checks of the gateway's part of the site repo.

- an external provider that takes a data class whose sovereignty rule forbids external fallback is a
  policy violation (exit 3): the gateway would never send that class there, and the file says it may;
- one key hash under two tenants is a config problem (exit 2): the gateway could not tell them apart.
"""

from __future__ import annotations

from llm_fabric.policies.defaults import effective_policies
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


site_checks: list[SiteCheck] = [check_external_providers, check_key_hashes]
