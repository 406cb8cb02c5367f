"""`fabric validate`: schema and reference problems (exit 2), then policy violations (exit 3).

Checks beyond the loader's own live in the feature packages; each such module exposes
`site_checks: list[SiteCheck]` and is listed in `site_checks()` below, so that `fabric validate`
and the CI gate stay one command.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.engine.site_checks import site_checks as engine_checks
from llm_fabric.enrollment.signature_checks import site_checks as signature_checks
from llm_fabric.gateway.site_checks import site_checks as gateway_checks
from llm_fabric.policies.gate import site_checks as policy_checks
from llm_fabric.site.loader import collect_site
from llm_fabric.site.validation import SiteCheck, ValidationReport


def site_checks() -> list[SiteCheck]:
    """Every check beyond the loader's own; a feature that adds one adds its module's list here."""
    return [*engine_checks, *policy_checks, *signature_checks, *gateway_checks]


def validate_site(root: Path) -> ValidationReport:
    site, problems = collect_site(root)
    report = ValidationReport(root=root, problems=list(problems))
    if site is None:
        return report
    report.summary = {
        "sites": len(site.config.sites),
        "nodes": len(site.nodes),
        "gpus": sum(n.gpus.count for n in site.nodes.values()),
        "tenants": len(site.tenants),
        "deployments": len(site.deployments),
    }
    if report.problems:
        # policies are judged on a well-formed repo only; their findings would be noise otherwise
        return report
    for check in site_checks():
        for finding in check(site):
            (report.problems if finding.severity == "config" else report.violations).append(finding.problem)
    return report
