"""`fabric validate`: schema and reference problems (exit 2), then policy violations (exit 3).

Checks beyond the loader's own live in the modules listed in `SITE_CHECK_MODULES`; each such
module exposes `site_checks: list[SiteCheck]`, and each check returns findings with a severity.
A feature that adds a check (node signatures, sovereignty policies) adds its module here, so that
`fabric validate` and the CI gate stay one command.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from llm_fabric.errors import EXIT_OK, EXIT_POLICY, EXIT_USAGE, Problem
from llm_fabric.site.loader import SiteRepo, collect_site

Severity = Literal["config", "policy"]


@dataclass(frozen=True)
class Finding:
    severity: Severity
    problem: Problem


@dataclass
class ValidationReport:
    root: Path
    problems: list[Problem] = field(default_factory=list)
    violations: list[Problem] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.problems:
            return EXIT_USAGE
        if self.violations:
            return EXIT_POLICY
        return EXIT_OK

    def as_dict(self) -> dict[str, object]:
        return {
            "site_repo": str(self.root),
            "valid": self.exit_code == EXIT_OK,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "problems": [p.as_dict() for p in self.problems],
            "violations": [p.as_dict() for p in self.violations],
        }


SiteCheck = Callable[[SiteRepo], list[Finding]]

SITE_CHECK_MODULES: list[str] = [
    "llm_fabric.engine.site_checks",
    "llm_fabric.policies.gate",
    "llm_fabric.enrollment.signature_checks",
]


def site_checks() -> list[SiteCheck]:
    checks: list[SiteCheck] = []
    for name in SITE_CHECK_MODULES:
        checks.extend(importlib.import_module(name).site_checks)
    return checks


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
