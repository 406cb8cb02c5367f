"""`fabric plan`: the site repo planned (and diffed against a base revision), written, its comment, its verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llm_fabric import wording
from llm_fabric.errors import PolicyRefusal
from llm_fabric.plan.document import Plan, write_plan
from llm_fabric.review.base import ReviewedPlan, plan_repo
from llm_fabric.review.report import markdown
from llm_fabric.trust.root import KeyChange


@dataclass(frozen=True)
class PlanRequest:
    """What `fabric plan` was asked: the site repo, the revision to compare with, the keys, where to write the plan."""

    site_repo: Path
    base_rev: str | None
    keyring: Path | None
    output: Path | None
    time_limit: float | None


def plan_request(request: PlanRequest, on_key_change: Callable[[KeyChange], None]) -> ReviewedPlan:
    """The site repo's plan (with its diff against `base_rev`), also written to `output` when asked."""
    reviewed = plan_repo(
        request.site_repo,
        request.base_rev,
        request.keyring,
        time_limit_s=request.time_limit,
        on_key_change=on_key_change,
    )
    if request.output is not None:
        write_plan(reviewed.plan, request.output)
    return reviewed


def markdown_comment(reviewed: ReviewedPlan) -> str:
    """The plan as one pull-request comment: the key changes first, then the change's tables."""
    head = ""
    if reviewed.key_changes:  # the PR comment shows what the change does to the federation's keys, first
        lines = "".join(f"- {c.describe()}\n" for c in reviewed.key_changes)
        head = f"### Key changes\n\n{lines}\n"
    return head + markdown(reviewed.plan, reviewed.diff)


def refuse_undeployable(plan: Plan) -> None:
    """PolicyRefusal when `plan` is not deployable: its problems counted (they are listed in the output before)."""
    if plan.deployable:
        return
    count = len(plan.violations) + len(plan.shortfalls)
    refused = plan.rollout.refused if plan.rollout is not None else []
    what = wording.count(count, "problem")
    if refused and not plan.violations and all(s.out_of_service for s in plan.shortfalls):
        # only the rollout refuses it: the deployments and their outage, in the message
        raise PolicyRefusal(
            f"the change to `{plan.federation}` is refused: " + "; ".join(d.to_problem().message for d in refused),
            hint=refused[0].to_problem().hint,
        )
    if refused:
        what += f", {wording.count(len(refused), 'refused rollout')}"
    raise PolicyRefusal(f"the plan for `{plan.federation}` is incomplete ({what}, listed above)")
