"""`fabric plan`, with `--base REV` for a pull request: the change's plan judged by the base's keys, its diff
and its rollout.

With a base revision the nodes are judged by the base's keys (`trust.root.trust_root`): a change
cannot vouch for itself. The base is checked out into a temporary folder, planned with its own keys,
and the change is planned against it (a replica stays where it was when it still fits); the rollout
(`plan.rollout`) says which replicas the change restarts, in which waves, and whether it may.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llm_fabric.errors import PolicyRefusal
from llm_fabric.plan.document import Plan, PlanDiff
from llm_fabric.plan.planning import plan_site
from llm_fabric.review.diff import diff_plans
from llm_fabric.review.revision import checkout_revision
from llm_fabric.review.rollout import plan_rollout
from llm_fabric.review.weights_diff import diff_locks, lock_refusals
from llm_fabric.site.weights_lock import LOCK_FILE
from llm_fabric.trust.root import KeyChange, trust_root
from llm_fabric.trust.sites import load_trusted_site


@dataclass(frozen=True)
class ReviewedPlan:
    plan: Plan  # with `diff` and `rollout` set when there is a base
    diff: PlanDiff | None = None
    key_changes: list[KeyChange] = field(default_factory=list)


def plan_repo(
    site_repo: Path,
    base_rev: str | None = None,
    keyring: Path | None = None,
    *,
    time_limit_s: float | None = None,
    on_key_change: Callable[[KeyChange], None] | None = None,
) -> ReviewedPlan:
    """The plan of the site repo; with `base_rev`, also its diff against the base revision's plan.

    `on_key_change` hears of every key change before a refused one stops the plan (PolicyRefusal).
    """
    trust = trust_root(site_repo, base_rev, keyring)
    for change in trust.changes:
        if on_key_change is not None:
            on_key_change(change)
    trust.require_accepted()
    site = load_trusted_site(site_repo, trust.keys)
    if base_rev is None:
        return ReviewedPlan(plan_site(site, time_limit_s=time_limit_s), None, trust.changes)
    with tempfile.TemporaryDirectory(prefix="fabric-base-") as tmp:
        base_site = load_trusted_site(checkout_revision(site_repo, base_rev, Path(tmp)), trust.base_keys)
        refused = lock_refusals(site.root, base_site.weights_lock, site.weights_lock, base_rev)
        if refused:
            raise PolicyRefusal(
                f"the change against {base_rev} pins weights in {LOCK_FILE} that its review cannot vouch for",
                problems=refused,
            )
        base_plan = plan_site(base_site, time_limit_s=time_limit_s)
        plan = plan_site(site, base_plan, time_limit_s=time_limit_s)
        diff = diff_plans(base_plan, plan, base_rev)
        remote_code = {r.checkpoint for r in plan.replicas if r.config_fingerprint.fields.trust_remote_code}
        diff.weights = [
            w.model_copy(update={"remote_code_revision": w.revision_after}) if w.checkpoint in remote_code else w
            for w in diff_locks(base_site.weights_lock, site.weights_lock)
        ]
        rollout = plan_rollout(site, base_plan, plan, base_rev)
    return ReviewedPlan(plan.model_copy(update={"diff": diff, "rollout": rollout}), diff, trust.changes)
