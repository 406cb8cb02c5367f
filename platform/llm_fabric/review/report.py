"""The review's tables: what a change does against its base (nodes, GPUs, replicas, capacity, policies,
weights.lock, the rollout), put before the plan's own tables (`plan.report`)."""

from __future__ import annotations

from llm_fabric.plan.document import Plan, PlanDiff, Shortfall
from llm_fabric.plan.report import markdown as plan_markdown
from llm_fabric.plan.report import sections as plan_sections
from llm_fabric.plan.report import shortfall_rule
from llm_fabric.plan.section import Section
from llm_fabric.review.rollout_report import rollout_sections


def _node_diff(diff: PlanDiff) -> list[Section]:
    nodes = Section(
        f"Changes against {diff.base_revision}: nodes",
        ("node", "site", "change", "before", "after"),
        [(c.node, c.site, c.change, c.before or "-", c.after or "-") for c in diff.nodes],
        () if diff.nodes else ("no node is added, removed, retired, cordoned or changed",),
    )
    rows = [
        (g.site, g.gpu_model, f"{g.gpus_before} -> {g.gpus_after}", f"{g.gpus_after - g.gpus_before:+d}", "-")
        for g in diff.gpus
    ]
    rows += [
        (
            s.site,
            "all",
            f"{s.gpus_before} -> {s.gpus_after}",
            f"{s.gpus_after - s.gpus_before:+d}",
            f"{s.free_before} -> {s.free_after}",
        )
        for s in diff.sites
    ]
    gpus = Section(
        f"Changes against {diff.base_revision}: GPUs (schedulable)",
        ("site", "GPU", "GPUs", "change", "free"),
        rows,
        () if rows else ("schedulable and free GPUs unchanged",),
    )
    return [nodes, gpus]


def _while(s: Shortfall) -> str:
    return f" while {', '.join(s.out_of_service)} is out of service" if s.out_of_service else ""


def _diff(diff: PlanDiff) -> list[Section]:
    moves = Section(
        f"Changes against {diff.base_revision}: replicas",
        ("deployment", "replica", "change", "before", "after"),
        [(c.deployment, str(c.index), c.change, c.before or "-", c.after or "-") for c in diff.replicas],
        () if diff.replicas else ("no replica is added, moved, removed or switched to another engine",),
    )
    cap = Section(
        f"Changes against {diff.base_revision}: capacity",
        ("deployment", "replicas", "sessions p50", "sessions p95", "tok/s total (ceiling)"),
        [
            (
                c.deployment,
                f"{c.replicas_before} -> {c.replicas_after}",
                f"{c.concurrency_p50_before} -> {c.concurrency_p50_after}",
                f"{c.concurrency_p95_before} -> {c.concurrency_p95_after}",
                f"{c.tokens_per_s_before:g} -> {c.tokens_per_s_after:g}",
            )
            for c in diff.capacity
        ],
        () if diff.capacity else ("deployment capacity unchanged",),
    )
    rows = [("new", v.rule, v.message) for v in diff.new_violations]
    rows += [("resolved", v.rule, v.message) for v in diff.resolved_violations]
    rows += [
        ("new", shortfall_rule(s), f"{s.deployment}: {s.planned} of {s.wanted} {s.unit}{_while(s)}")
        for s in diff.new_shortfalls
    ]
    rows += [
        ("resolved", shortfall_rule(s), f"{s.deployment}: {s.planned} of {s.wanted} {s.unit}{_while(s)}")
        for s in diff.resolved_shortfalls
    ]
    pol = Section(
        f"Changes against {diff.base_revision}: policies",
        ("", "rule", "what"),
        rows,
        () if rows else ("no new policy violation or shortfall",),
    )
    return [*_node_diff(diff), moves, cap, pol, *_weights_diff(diff)]


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _weights_diff(diff: PlanDiff) -> list[Section]:
    """Only when weights.lock changed: a change that pins no weights reads as before."""
    if not diff.weights:
        return []
    rows = [
        (
            w.checkpoint,
            w.change,
            f"{(w.revision_before or '-')[:12]} -> {(w.revision_after or '-')[:12]}"
            + (" (trust_remote_code)" if w.remote_code_revision else ""),
            f"{len(w.files_changed)}: {', '.join(w.files_changed[:3])}{', ...' if len(w.files_changed) > 3 else ''}",
            f"{_bytes(w.bytes_before)} -> {_bytes(w.bytes_after)}",
        )
        for w in diff.weights
    ]
    note = "a replica loading a changed checkpoint restarts; its pod checks the new files before the engine starts"
    # the code a trust_remote_code recipe runs in the engine pod is the checkpoint repo's at this revision
    remote = tuple(
        f"trust_remote_code: the engine pods of {w.checkpoint} run the code of its revision {w.remote_code_revision}"
        for w in diff.weights
        if w.remote_code_revision
    )
    return [
        Section(
            f"Changes against {diff.base_revision}: weights.lock",
            ("checkpoint", "change", "revision", "files changed", "size"),
            rows,
            (note, *remote),
        )
    ]


def sections(plan: Plan, diff: PlanDiff | None = None) -> list[Section]:
    """The change's tables (when it has a base), its rollout, then the plan's."""
    review = _diff(diff) if diff is not None else []
    review += rollout_sections(plan.rollout) if plan.rollout is not None else []
    return review + plan_sections(plan)


def markdown(plan: Plan, diff: PlanDiff | None = None) -> str:
    return plan_markdown(plan, sections(plan, diff))
