"""The three stacks' resources from a site repo (and, for serving, its plan): what Pulumi and render share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from llm_fabric.deploy.manifests import Bundle
from llm_fabric.deploy.options import StackOptions
from llm_fabric.deploy.plan import Plan, build_plan
from llm_fabric.deploy.resources.allocations import build_allocations, build_local_queues
from llm_fabric.deploy.resources.observability import build_observability
from llm_fabric.deploy.resources.serving import build_serving
from llm_fabric.deploy.sites import resolve_site
from llm_fabric.errors import ConfigError, Problem, UsageError
from llm_fabric.site.loader import SiteRepo, load_site

# the order to deploy them in: cluster-wide quota first, then the namespace and its workloads
STACK_ORDER = ("allocations", "serving", "observability")


@dataclass
class StackInputs:
    site: SiteRepo
    site_id: str
    namespace: str
    options: StackOptions
    plan: Plan | None = None

    def the_plan(self) -> Plan:
        if self.plan is None:
            self.plan = load_plan(self.options.plan_file) if self.options.plan_file else build_plan(self.site)
        return self.plan.require_complete()


def load_inputs(options: StackOptions, *, site: SiteRepo | None = None, plan: Plan | None = None) -> StackInputs:
    repo = site if site is not None else load_site(options.site_repo)
    site_id = resolve_site(repo, options.site)
    namespace = repo.config.sites[site_id].cluster.namespace
    return StackInputs(repo, site_id, namespace, options, plan)


def load_plan(path: Path) -> Plan:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot read the plan {path}: {exc.strerror}", hint="write it with `fabric plan --json`"
        ) from exc
    try:
        return Plan.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(s) for s in first["loc"])
        raise ConfigError(
            [
                Problem(
                    str(first["msg"]), file=path, field=where or None, hint="regenerate it with `fabric plan --json`"
                )
            ],
            summary=f"{path} is not a plan ({exc.error_count()} problems)",
        ) from exc


def build_stack(stack: str, inputs: StackInputs) -> list[Bundle]:
    """Bundles of one stack, in the order they must be applied."""
    if stack == "allocations":
        return build_allocations(inputs.site, inputs.site_id)
    if stack == "serving":
        serving = build_serving(inputs.site, inputs.the_plan(), inputs.site_id, inputs.namespace, inputs.options)
        # the namespace comes first; the LocalQueues live in it and the workloads name them
        return serving[:1] + build_local_queues(inputs.site, inputs.namespace) + serving[1:]
    if stack == "observability":
        return build_observability(inputs.namespace, inputs.options)
    raise UsageError(f"unknown stack `{stack}`", hint=f"one of {', '.join(STACK_ORDER)}")
