"""`fabric validate` checks of the gateway's counters and budgets (docs/gateway.md, "Limits across pods").

- more than one gateway replica without a shared counter store is a config problem (exit 2): each pod
  would enforce every limit and budget on its own, N times what the site repo says; with one replica,
  monthly budgets counted in the process are a warning (a restart forgets the month-to-date);
- `gateway.budget_shares` names only sites of fabric.yaml, every gateway site, and at most the whole budget;
- a `price_per_month` needs ledger.yaml's reference prices to be spent by (a warning per deployment the
  tenant may use that has none: its tokens cost nothing against the budget).
"""

from __future__ import annotations

from llm_fabric.gateway.budgets import one_store
from llm_fabric.site.loader import FABRIC_FILE, LEDGER_FILE, SiteRepo
from llm_fabric.site.validation import Finding, SiteCheck


def check_shared_counters(site: SiteRepo) -> list[Finding]:
    gw = site.config.gateway
    if gw is None or gw.counters is not None:
        return []
    path = site.root / FABRIC_FILE
    if gw.replicas > 1:
        message = (
            f"gateway.replicas is {gw.replicas} but the gateway has no shared counter store: each pod would enforce "
            f"every tenant's limits and monthly budget on its own ({gw.replicas} times what tenants/ say)"
        )
        hint = "add `counters: {}` under gateway (a Redis at each gateway site), or `counters: {url: redis://...}`"
        return [Finding("config", site.problem(path, ("gateway", "replicas"), message, hint + ", or replicas: 1"))]
    budgeted = sorted(
        n for n, t in site.tenants.items() if t.limits.tokens_per_month or t.limits.price_per_month is not None
    )
    if not budgeted:
        return []
    message = (
        f"monthly budgets ({', '.join(budgeted)}) are counted in the gateway's process: a restart of the gateway "
        "forgets the month-to-date"
    )
    hint = "add `counters: {}` under gateway: a Redis that keeps the counts on a claim"
    return [Finding("warning", site.problem(path, ("gateway",), message, hint))]


def check_budget_shares(site: SiteRepo) -> list[Finding]:
    gw = site.config.gateway
    if gw is None or not gw.budget_shares:
        return []
    path = site.root / FABRIC_FILE
    findings = []
    if one_store(gw):
        message = "gateway.budget_shares is set, but every site counts in the one store of gateway.counters.url"
        hint = "remove budget_shares: with one store each site's gateway enforces the whole budget"
        findings.append(Finding("warning", site.problem(path, ("gateway", "budget_shares"), message, hint)))
    for name in sorted(gw.budget_shares):
        if name not in site.config.sites:
            message = f"gateway.budget_shares names site `{name}`, which fabric.yaml does not have"
            hint = f"use sites of fabric.yaml: {', '.join(site.config.sites)}"
            findings.append(Finding("config", site.problem(path, ("gateway", "budget_shares", name), message, hint)))
    for name in site.config.gateway_sites():
        if name not in gw.budget_shares:
            message = f"gateway.budget_shares has no share for site `{name}`, whose gateway would admit no budget"
            hint = f"add `{name}: FRACTION` under gateway.budget_shares"
            findings.append(Finding("config", site.problem(path, ("gateway", "budget_shares"), message, hint)))
    total = sum(gw.budget_shares.values())
    if total > 1.0 + 1e-9:
        message = f"gateway.budget_shares add up to {total:g}: the sites together would admit more than the budget"
        hint = "make the shares add up to at most 1"
        findings.append(Finding("config", site.problem(path, ("gateway", "budget_shares"), message, hint)))
    return findings


def check_priced_budgets(site: SiteRepo) -> list[Finding]:
    priced = site.ledger.reference_prices if site.ledger is not None else {}
    findings = []
    for name, tenant in sorted(site.tenants.items()):
        if tenant.limits.price_per_month is None:
            continue
        path = site.path_of("tenants", name)
        if site.ledger is None:
            message = f"tenant `{name}` has a price_per_month, but the site repo has no {LEDGER_FILE} to price by"
            hint = f"add {LEDGER_FILE} with reference_prices, or use tokens_per_month"
            findings.append(Finding("config", site.problem(path, ("limits", "price_per_month"), message, hint)))
            continue
        unpriced = sorted(
            d for d, spec in site.deployments.items()
            if d not in priced and set(spec.data_classes) & set(tenant.data_classes)
        )  # fmt: skip
        if unpriced:
            message = (
                f"tenant `{name}`'s price_per_month does not count {', '.join(unpriced)}: "
                f"{LEDGER_FILE} has no reference price for them"
            )
            hint = f"add them under reference_prices in {LEDGER_FILE}"
            findings.append(Finding("warning", site.problem(path, ("limits", "price_per_month"), message, hint)))
    return findings


site_checks: list[SiteCheck] = [check_shared_counters, check_budget_shares, check_priced_budgets]
