"""The contributor's statement: per contributed node, what the machine did in the month.

Per node of a contributing group (a tenant with `contributor: true`), on a one-minute grid of the
month (to the report's time in a month in progress):

- its status from the site repo's history (`node_history`): active, cordoned, retired, or not yet
  enrolled; an active minute is *in service* when an engine replica on the node was up
  (`store.engine_up`, Prometheus's `up` series), else *down*. So service + down + cordoned +
  retired + not enrolled is the month's hours, per node.
- GPU-hours serving each deployment: each replica's up minutes times its GPUs (the plan's
  `gpu_indices` with `--plan`, else the deployment's `tensor_parallel_size`); idle GPU-hours are the
  in-service minutes' GPUs that no up replica held.
- who used it: the request records name a deployment, not a replica, so a deployment's usage is
  split over the nodes by the share of its replicas' up-time each node served (the gateway spreads a
  deployment's requests over its up replicas). The owner's part is its own use; every other tenant's
  part is lent to the pool, listed by tenant and valued at ledger.yaml's reference prices, applied
  here, at report time, as every price of the books is. A deployment served by one node is exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from llm_fabric.ledger.report.books import price_tokens
from llm_fabric.ledger.report.month_report import money, token_row
from llm_fabric.ledger.report.node_history import NodeStatus, StatusChange, status_history
from llm_fabric.ledger.store.engine_up import MINUTE, EngineUp, ReplicaKey, month_minutes
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.usage import Tokens
from llm_fabric.site import gitrepo
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import LedgerConfig

_CODES: dict[NodeStatus, int] = {"absent": 0, "active": 1, "cordoned": 2, "retired": 3}


@dataclass(frozen=True)
class StatementInputs:
    month: Month
    until: datetime
    up: EngineUp | None  # None: no Prometheus given
    usage: Mapping[tuple[str, str], Tokens] | None  # (deployment, tenant) from the records; None: none given
    replica_gpus: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (deployment, index) from the plan


def _hours(minutes: int) -> float:
    return round(minutes / 60, 4)


def _scaled(tokens: Tokens, share: Fraction) -> Tokens:
    """Whole tokens of a share of `tokens` (rounded half to even per count)."""
    return Tokens(
        requests=round(tokens.requests * share),
        failed=round(tokens.failed * share),
        input=round(tokens.input * share),
        cached_input=round(tokens.cached_input * share),
        output=round(tokens.output * share),
    )


def _status_grid(changes: list[StatusChange], start: datetime, minutes: int) -> bytearray:
    grid = bytearray(minutes)
    for change in sorted(changes, key=lambda c: c.at):
        offset = (change.at - start).total_seconds() / MINUTE
        first = max(0, min(minutes, math.ceil(offset)))
        grid[first:] = bytes([_CODES[change.status]]) * (minutes - first)
    return grid


def _history(site: SiteRepo, name: str) -> tuple[list[StatusChange], list[str]]:
    node = site.nodes[name]
    path = site.path_of("nodes", name)
    changes = status_history(site.root, path) if gitrepo.is_repo(site.root) else []
    if changes:
        return changes, []
    current: NodeStatus = node.status
    note = (
        f"`{name}`: no committed history of {path.relative_to(site.root)}: its current status "
        f"({node.status}) is taken for the whole time since its enrolled_at"
    )
    return [StatusChange(node.enrolled_at, current, None)], [note]


def _replica_gpus(site: SiteRepo, inputs: StatementInputs, key: ReplicaKey) -> int | None:
    planned = inputs.replica_gpus.get((key.deployment, key.replica))
    if planned is not None:
        return planned
    dep = site.deployments.get(key.deployment)
    return dep.tensor_parallel_size if dep is not None else None


def contributed_nodes(site: SiteRepo) -> list[str]:
    """The nodes of contributing groups (tenants with `contributor: true`), by name."""
    return sorted(n for n, node in site.nodes.items() if (t := site.tenants.get(node.owner)) and t.contributor)


def _deployment_up(up: EngineUp) -> dict[str, int]:
    totals: dict[str, int] = {}
    for key, grid in up.replicas.items():
        totals[key.deployment] = totals.get(key.deployment, 0) + sum(grid)
    return totals


def node_statement(
    site: SiteRepo, config: LedgerConfig, inputs: StatementInputs, name: str, deployment_up: Mapping[str, int]
) -> dict[str, Any]:
    """One node's statement row (`month_report.NodeStatementRow`)."""
    node = site.nodes[name]
    minutes = month_minutes(inputs.month, inputs.until)
    changes, notes = _history(site, name)
    status = _status_grid(changes, inputs.month.start, minutes)
    counts = {code: status.count(code) for code in _CODES.values()}
    mine = {k: g for k, g in (inputs.up.replicas.items() if inputs.up else []) if k.node == name}
    by_deployment: dict[str, list[ReplicaKey]] = {}
    for key in mine:
        by_deployment.setdefault(key.deployment, []).append(key)
    gpus_of = {key: _replica_gpus(site, inputs, key) for key in mine}
    service = down = serving = idle = None
    if inputs.up is not None:
        any_up = bytearray(minutes)
        busy = [0] * minutes
        for key, grid in mine.items():
            width = gpus_of[key] or 0
            for i in range(minutes):
                if grid[i]:
                    any_up[i] = 1
                    busy[i] += width
        active = _CODES["active"]
        service = sum(1 for i in range(minutes) if status[i] == active and any_up[i])
        down = counts[active] - service
        idle_minutes = sum(
            max(0, node.gpus.count - busy[i]) for i in range(minutes) if status[i] == active and any_up[i]
        )
        idle = _hours(idle_minutes)
        serving = _hours(sum((gpus_of[k] or 0) * sum(g) for k, g in mine.items()))
    owner_usage, lent = Tokens(), Tokens()
    lent_to: dict[str, Tokens] = {}
    owner_value = lent_value = Decimal(0)
    lent_values: dict[str, Decimal] = {}
    rows = []
    for deployment, keys in sorted(by_deployment.items()):
        dep = site.deployments.get(deployment)
        up_minutes = sum(sum(mine[k]) for k in keys)
        total = deployment_up.get(deployment, 0)
        share = Fraction(up_minutes, total) if total else None
        unknown = [k.replica for k in keys if gpus_of[k] is None]
        if unknown:
            notes.append(
                f"`{name}`: the GPUs of `{deployment}` replica(s) {', '.join(sorted(unknown))} are unknown "
                "(the planner chose its tensor parallel size): pass --plan for its GPU-hours"
            )
        mine_usage = others_usage = None
        if inputs.usage is not None and share is not None:
            mine_usage, others_usage = Tokens(), Tokens()
            prices = config.reference_prices.get(deployment)
            for (model, tenant), tokens in sorted(inputs.usage.items()):
                if model != deployment:
                    continue
                part = _scaled(tokens, share)
                value = price_tokens(part, prices) if prices is not None else Decimal(0)
                if tenant == node.owner:
                    mine_usage.add(part)
                    owner_value += value
                else:
                    others_usage.add(part)
                    lent_to.setdefault(tenant, Tokens()).add(part)
                    lent_values[tenant] = lent_values.get(tenant, Decimal(0)) + value
                    lent_value += value
            owner_usage.add(mine_usage)
            lent.add(others_usage)
        rows.append(
            {
                "deployment": deployment,
                "dedicated_for_owner": dep is not None and dep.dedicated_for == node.owner,
                "replicas": sorted(k.replica for k in keys),
                "up_hours": _hours(up_minutes),
                "gpu_hours": None if unknown else _hours(sum((gpus_of[k] or 0) * sum(mine[k]) for k in keys)),
                "share_of_deployment": round(float(share), 4) if share is not None else None,
                "owner_usage": token_row(mine_usage) if mine_usage is not None else None,
                "others_usage": token_row(others_usage) if others_usage is not None else None,
            }
        )
    attributed = inputs.usage is not None and inputs.up is not None
    return {
        "node": name,
        "site": node.site,
        "owner": node.owner,
        "gpu_model": node.gpus.catalog_id,
        "gpus": node.gpus.count,
        "month_hours": _hours(minutes),
        "service_hours": _hours(service) if service is not None else None,
        "down_hours": _hours(down) if down is not None else None,
        "active_hours": _hours(counts[_CODES["active"]]),
        "cordoned_hours": _hours(counts[_CODES["cordoned"]]),
        "retired_hours": _hours(counts[_CODES["retired"]]),
        "not_enrolled_hours": _hours(counts[_CODES["absent"]]),
        "status_changes": [
            {"at": f"{c.at:%Y-%m-%dT%H:%M:%SZ}", "status": c.status, "commit": c.commit}
            for c in changes
            if c.at < inputs.month.start + timedelta(minutes=minutes)
        ],
        "gpu_hours": _hours(node.gpus.count * minutes),
        "serving_gpu_hours": serving,
        "idle_gpu_hours": idle,
        "deployments": rows,
        "owner_usage": token_row(owner_usage) if attributed else None,
        "owner_value": money(owner_value) if attributed else None,
        "lent": token_row(lent) if attributed else None,
        "lent_value": money(lent_value) if attributed else None,
        "lent_to": {t: {**token_row(tokens), "value": money(lent_values[t])} for t, tokens in sorted(lent_to.items())},
        "notes": notes,
    }


def contributor_statement(
    site: SiteRepo, config: LedgerConfig, inputs: StatementInputs
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every contributed node's statement row, and the statement's data gaps (each note of a node, and
    what the statement could not place)."""
    deployment_up = _deployment_up(inputs.up) if inputs.up is not None else {}
    rows = []
    for name in contributed_nodes(site):
        row = node_statement(site, config, inputs, name, deployment_up)
        if row["retired_hours"] == row["month_hours"] and not row["deployments"]:
            continue  # retired before the month began: nothing to state
        rows.append(row)
    gaps = [note for row in rows for note in row["notes"]]
    if inputs.up is None:
        gaps.append(
            "contributor statement: no Prometheus given: hours in service and down, GPU-hours and who used "
            "each node need the engines' `up` series"
        )
    elif inputs.usage is not None:
        unplaced = sorted({m for (m, _t) in inputs.usage if not deployment_up.get(m)})
        if unplaced:
            listed = ", ".join(f"`{m}`" for m in unplaced)
            gaps.append(
                f"contributor statement: {listed} served requests but no replica of it was up in Prometheus: "
                "its usage is on no node's statement"
            )
    return rows, gaps
