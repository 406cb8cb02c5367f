"""The plan as tables: one set of rows, rendered as Markdown (a PR comment) or as terminal tables."""

from __future__ import annotations

from llm_fabric.plan.document import DeploymentCapacity, Plan, ReplicaPlacement, Shortfall, SpareHold
from llm_fabric.plan.section import Section


def seat(r: ReplicaPlacement) -> str:
    """Where a replica sits, in words: its node(s), GPUs and layout."""
    gpus = ",".join(map(str, r.gpu_indices))
    if r.parallelism == "tp" and not r.worker_nodes:
        return f"{r.node} GPUs {gpus} ({r.tensor_parallel_size}x{r.gpu_model})"
    return f"{'+'.join(r.nodes)} GPUs {gpus} each ({r.layout(len(r.gpu_indices)).describe()}, {r.gpu_model})"


def _placement(plan: Plan) -> Section:
    rows = [
        (r.deployment, str(r.index), seat(r), r.quantization, r.dedicated_for or "pool", r.site) for r in plan.replicas
    ]
    return Section("Placement", ("deployment", "replica", "node and GPUs", "quant", "serves", "site"), rows)


def _expected(c: DeploymentCapacity) -> str:
    """The calibrated figure with the range the calibration's error band gives its total."""
    e = c.expected
    if e is None or not e.output_tokens_per_s_total:
        return "-"
    low, high = e.error_band or (1.0, 1.0)
    total = e.output_tokens_per_s_total
    return f"{e.output_tokens_per_s_per_user:g} / {total:,.0f} ({total * low:,.0f}-{total * high:,.0f})"


def _capacity(plan: Plan) -> Section:
    rows = []
    for name, c in sorted(plan.deployments.items()):
        target = (
            f"{c.max_concurrency_target}/{c.target_sessions} @ {c.target_context_tokens}" if c.target_sessions else "-"
        )
        rows.append(
            (
                name,
                f"{c.replicas_planned}/{c.replicas_wanted}",
                f"{c.weights_gb:g}",
                f"{c.kv_pool_gb:g}",
                f"{c.max_concurrency_p50} @ {c.context_p50}",
                f"{c.max_concurrency_p95} @ {c.context_p95}",
                target,
                f"{c.decode_tokens_per_s_single:g}",
                f"{c.decode_tokens_per_s_per_user:g} / {c.decode_tokens_per_s_total:g}",
                _expected(c),
                "yes" if c.met else "NO",
                c.engine_summary,
            )
        )
    return Section(
        "Capacity per deployment",
        (
            "deployment",
            "replicas",
            "weights GB",
            "KV pool GB",
            "sessions p50",
            "sessions p95",
            "target",
            "tok/s single (ceiling)",
            "tok/s loaded (user/total, ceiling)",
            "expected loaded (user/total, band)",
            "met",
            "engine",
        ),
        rows,
        tuple(f"{name}: {c.multi_node}" for name, c in sorted(plan.deployments.items()) if c.multi_node),
    )


def _owners(plan: Plan) -> Section:
    rows = [
        (
            o.owner,
            str(o.contributed_gpus),
            str(o.dedicated_gpus),
            str(o.lent_gpus),
            str(o.used_by_pool_gpus),
            "yes" if o.lend_surplus else "no",
        )
        for o in plan.owners.values()
    ]
    return Section(
        "Allocations per owner (GPUs)",
        ("owner", "contributed", "dedicated", "lent", "running pool replicas", "lends idle dedicated"),
        rows,
        (
            *((f"reclaim order: {' > '.join(plan.reclaim_order)}",) if plan.reclaim_order else ()),
            *_owner_shortfalls(plan),
        ),
    )


def _owner_shortfalls(plan: Plan) -> list[str]:
    """What cordoned nodes cost each owner: GPUs out of service, dedicated GPUs nothing stands behind."""
    out = []
    for o in plan.owners.values():
        if not o.out_of_service_nodes:
            continue
        line = f"{o.owner}: {o.out_of_service_gpus} GPUs out of service ({', '.join(o.out_of_service_nodes)} cordoned)"
        if o.dedicated_shortfall_gpus:
            line += (
                f"; dedicated allocation short by {o.dedicated_shortfall_gpus} of {o.dedicated_gpus} GPUs "
                "until the node is back"
            )
        out.append(line)
    return out


def shortfall_rule(s: Shortfall) -> str:
    """A cordoned node's shortfall is deployable (`placement.out-of-service`); any other refuses the plan."""
    return "placement.out-of-service" if s.out_of_service else "placement.shortfall"


def verdict(plan: Plan) -> str:
    """complete, DEGRADED (short only while nodes are cordoned: deployable) or INCOMPLETE."""
    if plan.complete:
        return "complete"
    return "DEGRADED" if plan.deployable else "INCOMPLETE"


def _sites(plan: Plan) -> Section:
    rows = [(s.site, s.country, str(s.gpus_total), str(s.gpus_used), str(s.gpus_free)) for s in plan.sites.values()]
    return Section("GPUs per site", ("site", "country", "total", "used", "free"), rows)


def _verdicts(plan: Plan) -> Section:
    rows = [(v.rule, ", ".join(v.objects), v.message, v.hint) for v in plan.violations]
    rows += [
        (
            shortfall_rule(s),
            f"deployment/{s.deployment}",
            f"planned {s.planned} of {s.wanted} {s.unit}",
            " ".join(s.reasons),
        )
        for s in plan.shortfalls
    ]
    s = plan.solver
    note = (
        f"solver: {s.status}, gap {s.gap:.2%}, {s.wall_seconds:.2f} s, {s.node_classes} node classes, "
        f"{s.variables} variables"
    )
    notes = (
        note,
        "policy verdict: all policies satisfied, every target met"
        if plan.complete
        else (
            f"policy verdict: all policies satisfied; {len(plan.degraded)} short while nodes are cordoned "
            "(deployable: the rest is deployed, the shortfall ends when they are back)"
        )
        if plan.deployable
        else "policy verdict: NOT satisfied (see the rows above)",
    )
    return Section("Policy verdicts", ("rule", "objects", "what", "what would satisfy it"), rows, notes)


def _spare_covers(plan: Plan, hold: SpareHold) -> str:
    """What a spare means for capacity, in words."""
    if hold.state != "held":
        return hold.reason
    if hold.scope == "gpu_model":
        return f"a fault of one {hold.name} node of up to {hold.gpus} GPUs: its replicas move here first"
    cap = plan.deployments.get(hold.name)
    per = cap.max_concurrency_p50 // max(1, cap.replicas_planned) if cap is not None else 0
    return f"one more replica of {hold.name} ({per} sessions p50): a fault of a node running one moves it here first"


def _spares(plan: Plan) -> Section:
    rows = [
        (
            h.key.removeprefix("spare/").replace("_", " ", 1),
            h.state,
            f"{h.node} GPUs {','.join(map(str, h.gpu_indices))}" if h.node else "-",
            str(h.gpus),
            _spare_covers(plan, h),
        )
        for h in plan.spares
    ]
    in_service = sum(s.gpus_total for s in plan.sites.values())
    held = sum(h.gpus for h in plan.spares)
    note = (
        f"spares hold {held} of {in_service} GPUs in service ({held / max(1, in_service):.1%} of the pool): "
        f"replicas are planned on the other {in_service - held}"
    )
    return Section("Spares", ("spare", "state", "node and GPUs", "GPUs held", "what it covers"), rows, (note,))


def sections(plan: Plan) -> list[Section]:
    """The plan's own tables; `review.report.sections` puts a change's tables before them."""
    out = [_placement(plan), _capacity(plan), _owners(plan), _sites(plan)]
    return out + ([_spares(plan), _verdicts(plan)] if plan.spares else [_verdicts(plan)])


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(plan: Plan, tables: list[Section]) -> str:
    """`tables` as Markdown (a PR comment) under the plan's headline."""
    lines = [f"## fabric plan: `{plan.federation}` ({verdict(plan)})", ""]
    for sec in tables:
        lines += [f"### {sec.title}", ""]
        if sec.rows:
            lines.append("| " + " | ".join(sec.headers) + " |")
            lines.append("|" + "---|" * len(sec.headers))
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in sec.rows]
            lines.append("")
        lines += [f"_{n}_" for n in sec.notes]
        if sec.notes:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
