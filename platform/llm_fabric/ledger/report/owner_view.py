"""A contributor's own report (`fabric report --owner GROUP`): its nodes' statement and nothing else.

Cut from the federation's report of the month (`build_report`, the same figures), it holds only
what concerns the owner: the statement rows of its nodes (other tenants appear there only as whom
it lent to, with what they used of its nodes), its line of the contributors ledger, the plan's
shortfalls that name its dedicated deployments or its nodes (`--plan`), and the data gaps that
bear on it. It is written and signed as the federation's report is (`publish.write_folder`), so
`fabric report verify` checks it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_fabric.documents import suggest
from llm_fabric.errors import UsageError
from llm_fabric.ledger.report.month_report import LentRow, MonthReport, OwnerReport
from llm_fabric.ledger.report.statement import contributed_nodes
from llm_fabric.plan.document import Shortfall
from llm_fabric.site.loader import SiteRepo

# the federation's data gaps that bear on every owner: the month's coverage and the sources missing
_GENERAL_GAPS = ("partial month:", "no request records given", "contributor statement: no ")


def owner_groups(site: SiteRepo) -> list[str]:
    """The groups a contributor view can be drawn up for: contributing tenants and the owners of nodes."""
    contributors = {n for n, t in site.tenants.items() if t.contributor}
    return sorted(contributors | {site.nodes[n].owner for n in contributed_nodes(site)})


def check_owner(site: SiteRepo, owner: str) -> None:
    """UsageError (exit 2) for a group that contributes nothing, with the closest known group."""
    known = owner_groups(site)
    if owner in known:
        return
    # a group's name cut short (`ceitec` for ceitec-structural) is the likeliest slip; else the closest spelling
    close = next((k for k in known if k.startswith(owner)), None) or suggest(owner, known)
    guess = f"did you mean `{close}`? " if close else ""
    raise UsageError(
        f"--owner `{owner}` is not a contributing group of {site.root}",
        hint=f"{guess}the contributing groups: {', '.join(known) or 'none'} (tenants/*.yaml with contributor: true)",
    )


def _concerns(shortfall: Shortfall, site: SiteRepo, owner: str, nodes: set[str]) -> bool:
    dep = site.deployments.get(shortfall.deployment)
    if dep is not None and dep.dedicated_for == owner:
        return True
    return any(name in reason for reason in shortfall.reasons for name in (owner, *nodes))


def owner_view(report: MonthReport, site: SiteRepo, owner: str, shortfalls: Sequence[Shortfall] = ()) -> OwnerReport:
    """The owner's report, cut from the federation's `report` of the month."""
    check_owner(site, owner)
    rows = [row for row in report.statement if row.owner == owner]
    nodes = {row.node for row in rows}
    lent: dict[str, dict[str, Any]] = {}
    for row in rows:
        for user, line in row.lent_to.items():
            total = lent.setdefault(user, {k: 0 for k in LentRow.model_fields if k != "input_output_ratio"})
            for key, value in line.model_dump().items():
                if key != "input_output_ratio" and value is not None:
                    total[key] += value
    for total in lent.values():
        total["value"] = round(total["value"], 2)
        out = total["output_tokens"]
        total["input_output_ratio"] = round(total["input_tokens"] / out, 2) if out else None
    values = [row.lent_value for row in rows if row.lent_value is not None]
    notes = [note for row in rows for note in row.notes]
    tenant = site.tenants.get(owner)
    return OwnerReport.model_validate(
        {
            "federation": report.federation,
            "month": report.month,
            "generated_at": report.generated_at,
            "currency": report.currency,
            "owner": owner,
            "owner_name": tenant.display_name if tenant is not None and tenant.display_name else owner,
            "dedicated_gpus": tenant.dedicated.gpus if tenant is not None and tenant.dedicated else 0,
            "contributor": next((c for c in report.contributors if c.owner == owner), None),
            "statement": rows,
            "lent_to": dict(sorted(lent.items())),
            "lent_value": round(sum(values), 2) if values else None,
            "plan_shortfalls": [
                f"{s.to_problem().message}: {'; '.join(s.reasons)}"
                for s in shortfalls
                if _concerns(s, site, owner, nodes)
            ],
            "data_gaps": [g for g in report.data_gaps if g.startswith(_GENERAL_GAPS)] + notes,
        }
    )
