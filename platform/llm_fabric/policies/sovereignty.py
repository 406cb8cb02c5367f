"""Sovereignty: which sites may process each data class. Hosting location and operator count, not
model provenance (seed 000: "the data stays where it was sent").
"""

from __future__ import annotations

from collections.abc import Iterable

from llm_fabric.site.models import PolicySet, SiteSpec, SovereigntyRule


def rule_refusals(data_class: str, rule: SovereigntyRule | None, site_name: str, site: SiteSpec) -> list[str]:
    """Why `site` may not process `data_class` (empty when it may)."""
    if rule is None:
        return [f"data class `{data_class}` has no sovereignty rule, so no site may process it"]
    out: list[str] = []
    country = site.jurisdiction.country
    if rule.jurisdictions and country not in rule.jurisdictions:
        out.append(
            f"`{data_class}` data may be processed only in {', '.join(rule.jurisdictions)}; "
            f"site `{site_name}` is in {country}"
        )
    if rule.eu_only and not site.jurisdiction.eu:
        out.append(f"`{data_class}` data must stay in the EU; site `{site_name}` ({country}) is outside it")
    if rule.federation_operators_only and not site.operator.federation_member:
        out.append(
            f"`{data_class}` data may be processed only by federation members; "
            f"site `{site_name}` is operated by {site.operator.name}, who is not one"
        )
    return out


def site_refusals(policies: PolicySet, data_classes: Iterable[str], site_name: str, site: SiteSpec) -> list[str]:
    out: list[str] = []
    for dc in data_classes:
        out.extend(rule_refusals(dc, policies.sovereignty.get(dc), site_name, site))
    return out


def prompt_logging_allowed(policies: PolicySet, data_classes: Iterable[str]) -> bool:
    """False when any class served forbids logging prompts (or has no rule: the strict reading)."""
    return all((r := policies.sovereignty.get(dc)) is not None and r.prompt_logging for dc in data_classes)


def external_fallback_allowed(policies: PolicySet, data_classes: Iterable[str]) -> bool:
    return all((r := policies.sovereignty.get(dc)) is not None and r.external_fallback for dc in data_classes)
