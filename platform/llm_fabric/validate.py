"""`fabric validate`: schema and reference problems (exit 2), then policy violations (exit 3).

Checks beyond the loader's own live in the feature packages; each such module exposes
`site_checks: list[SiteCheck]` and is listed in `site_checks()` below, so that `fabric validate`
and the CI gate stay one command.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from llm_fabric.engine.site_checks import site_checks as engine_checks
from llm_fabric.enrollment.signature_checks import check_node_signatures
from llm_fabric.errors import Problem, UsageError
from llm_fabric.gateway.site_checks import site_checks as gateway_checks
from llm_fabric.gateway.store_checks import site_checks as gateway_store_checks
from llm_fabric.ledger.site_checks import site_checks as ledger_checks
from llm_fabric.policies.gate import site_checks as policy_checks
from llm_fabric.policies.spares import site_checks as spare_checks
from llm_fabric.review.weights_diff import lock_at, lock_refusals
from llm_fabric.site.loader import REFERENCE_CHECKS, collect_site
from llm_fabric.site.validation import SiteCheck, ValidationReport
from llm_fabric.trust.root import TrustRoot, trust_root


def site_checks() -> list[SiteCheck]:
    """Every check beyond the loader's own that needs a well-formed repo; a feature adds its module's list here.

    Node signatures are checked apart: a manifest that loaded can be verified whatever else is wrong,
    so one pass shows schema, reference and signature problems together.
    They are judged against the trust root of the run (`trust.trust_root`).
    """
    return [*engine_checks, *policy_checks, *spare_checks, *gateway_checks, *gateway_store_checks, *ledger_checks]


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
    if base_rev is not None:
        # weights.lock is trusted only as a reviewed change (review/weights_diff.py)
        report.violations += lock_refusals(root, lock_at(root, base_rev), site.weights_lock, base_rev)
    report.summary = {
        "sites": len(site.config.sites),
        "nodes": len(site.nodes),
        "gpus": sum(n.gpus.count for n in site.nodes.values()),
        "tenants": len(site.tenants),
        "deployments": len(site.deployments),
    }
    checks: list[SiteCheck] = []
    if trust is not None:
        keys = trust.keys
        checks.append(lambda s: check_node_signatures(s, keys))
    if not report.problems:
        # policies are judged on a well-formed repo only; their findings would be noise otherwise
        checks += site_checks()
    for check in checks:
        for finding in check(site):
            {"config": report.problems, "policy": report.violations, "warning": report.warnings}[
                finding.severity
            ].append(finding.problem)
    return report


def problems_after_status(root: Path, name: str, status: str) -> list[Problem]:
    """What `fabric validate` would newly report once node NAME has `status` (retired, cordoned).

    Judged in memory on the repo as it is, before anything is written, so that `fabric nodes retire`
    and `cordon` can warn first: a tenant's dedicated allocation that only this node's GPUs covered,
    once the node is retired, say (a cordoned node's absence is a shortfall the plan reports, not a
    problem). Problems the repo already has are left out; signatures are not judged (the change is
    re-signed).
    """
    site, problems = collect_site(root)
    if site is None or name not in site.nodes:
        return []
    # policies are judged on a well-formed repo only (as in validate_site)
    policy_checks = [] if problems else site_checks()
    changed = replace(site, nodes=site.nodes | {name: site.nodes[name].model_copy(update={"status": status})})
    before = {_key(p) for p in problems} | {_key(f.problem) for check in policy_checks for f in check(site)}
    after = [p for check in REFERENCE_CHECKS for p in check(changed)]
    # warnings leave validate passing: a cordon's shortfall is the plan's to report, not a problem to fix
    after += [f.problem for check in policy_checks for f in check(changed) if f.severity != "warning"]
    return [p for p in after if _key(p) not in before]


def _key(problem: Problem) -> tuple[object, ...]:
    # a violation's text lists every node's state, so the same violation reads differently once a
    # node's status changes: it is the same problem when place and first word (its code) agree
    return (problem.file, problem.line, problem.field, problem.message.split(" ", 1)[0])
