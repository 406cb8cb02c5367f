"""The rollout as review tables (`fabric plan --base`): restarts and why, surge replicas, waves, outages."""

from __future__ import annotations

from llm_fabric.plan.document import DeploymentRollout, Rollout
from llm_fabric.plan.report import seat
from llm_fabric.plan.section import Section

_WHY = {
    "fingerprint": "configuration changed",
    "weights": "weights.lock pins other bytes",
    "node": "moves to another node",
    "gpus": "moves to other GPUs",
    "engine": "another serving engine",
    "added": "new replica",
    "removed": "replica removed",
}


def duration(seconds: int) -> str:
    return f"{seconds} s" if seconds < 120 else f"about {round(seconds / 60)} min ({seconds} s)"


def _outage(d: DeploymentRollout) -> str:
    sites = " and ".join(d.unordered_sites)
    if d.outage_s is None:
        if d.unordered_sites and d.down_at_once > d.max_unavailable:
            return (
                f"{d.deployment}: up to {d.down_at_once} replicas down at once, more than max_unavailable "
                f"{d.max_unavailable}: its restarts at {sites} are ordered within each site only"
            )
        return f"{d.deployment}: never every replica down at once (max_unavailable {d.max_unavailable})"
    minutes = max(1, round(d.outage_s / 60))
    head = f"{d.deployment}: every replica down at once, an outage of about {minutes} minutes"
    if d.unordered_sites:
        head = (
            f"{d.deployment}: every replica can be down at once (its restarts at {sites} are ordered within "
            f"each site only), an outage of about {minutes} minutes"
        )
    if d.outage_accepted is not None:
        return f"{head}: accepted ({d.outage_accepted})"
    if d.unordered_sites:
        return f"{head}: REFUSED (`rollout.accept_outage` not set)"
    return f"{head}: REFUSED (no free GPUs or spare for a surge replica; `rollout.accept_outage` not set)"


def _wave_rows(rollout: Rollout) -> list[tuple[str, ...]]:
    rows = [
        (
            w.wave,
            d.deployment,
            ", ".join(map(str, w.surges)) or "-",
            ", ".join(map(str, w.restarts)) or "-",
            f"{w.serving}/{w.target}",
            str(w.sessions_p50),
            duration(w.cold_start_s),
        )
        for d in rollout.deployments
        for w in d.waves
    ]
    return [(str(r[0]), *r[1:]) for r in sorted(rows, key=lambda r: (r[0], r[1]))]


def rollout_sections(rollout: Rollout) -> list[Section]:
    base = rollout.base_revision
    restarts = Section(
        f"Rollout against {base}: restarts",
        ("deployment", "replica", "why", "before", "after"),
        [
            (d.deployment, str(r.index), _WHY[r.reason], r.before or "-", r.after or "-")
            for d in rollout.deployments
            for r in d.restarts
        ],
        () if rollout.deployments else ("the change restarts no replica",),
    )
    surges = [
        (d.deployment, str(s.replaces), seat(s.placement), s.placement.site, s.source)
        for d in rollout.deployments
        for s in d.surges
    ]
    waves = Section(
        f"Rollout against {base}: waves",
        ("wave", "deployment", "surges up", "restarts", "serving/target", "sessions p50", "cold start"),
        _wave_rows(rollout),
        (
            *(_outage(d) for d in rollout.deployments),
            "each wave starts when the one before it serves at its site; a site's waves N are applied together",
        ),
    )
    out = [restarts]
    if surges:
        out.append(
            Section(
                f"Rollout against {base}: surge replicas",
                ("deployment", "stands in for replica", "node and GPUs", "site", "from"),
                surges,
                (
                    "a surge replica serves before the replica it stands in for restarts; the next plan of the "
                    "merged revision removes it",
                ),
            )
        )
    return [*out, waves] if rollout.deployments else out
