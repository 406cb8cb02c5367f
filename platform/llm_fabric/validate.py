"""`fabric validate`: schema and reference problems (exit 2), then policy violations (exit 3).

Checks beyond the loader's own live in the feature packages; each such module exposes
`site_checks: list[SiteCheck]` and is listed in `site_checks()` below, so that `fabric validate`
and the CI gate stay one command.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.engine.site_checks import site_checks as engine_checks
from llm_fabric.enrollment.signature_checks import check_node_signatures
from llm_fabric.errors import Problem, UsageError
from llm_fabric.gateway.site_checks import site_checks as gateway_checks
from llm_fabric.policies.gate import site_checks as policy_checks
from llm_fabric.site.loader import collect_site
from llm_fabric.site.validation import SiteCheck, ValidationReport
from llm_fabric.trust import TrustRoot, trust_root


def site_checks() -> list[SiteCheck]:
    """Every check beyond the loader's own; a feature that adds one adds its module's list here.

    Node signatures are checked apart (`check_node_signatures`), against the trust root of the run.
    """
    return [*engine_checks, *policy_checks, *gateway_checks]


def validate_site(root: Path, base_rev: str | None = None, keyring: Path | None = None) -> ValidationReport:
    """`base_rev` (or `keyring`, a folder of keys outside the repo): judge the nodes by its keys, list key
    changes, refuse untrusted ones (exit 3)."""
    site, problems = collect_site(root)
    report = ValidationReport(root=root, problems=list(problems))
    trust: TrustRoot | None = None
    try:
        trust = trust_root(root, base_rev, keyring) if site is not None else None
    except UsageError as exc:
        report.problems.append(Problem(exc.message, file=root / "keys", hint=exc.hint))
    if trust is not None:
        report.key_changes = [c.describe() for c in trust.changes]
        report.violations += trust.refused
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
    checks: list[SiteCheck] = [*site_checks()]
    if trust is not None:
        keys = trust.keys
        checks.append(lambda s: check_node_signatures(s, keys))
    for check in checks:
        for finding in check(site):
            (report.problems if finding.severity == "config" else report.violations).append(finding.problem)
    return report
