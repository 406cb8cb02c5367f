"""The three stacks' resources from a site repo (and, for serving, its plan): what Pulumi and render share."""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.errors import UsageError
from llm_fabric.gateway.objects.counters import build_counter_bundles
from llm_fabric.gateway.objects.gateway import build_gateway_bundles
from llm_fabric.kube.manifests import Bundle
from llm_fabric.kube.options import StackOptions
from llm_fabric.kube.sites import resolve_site
from llm_fabric.observability.canary import build_canary
from llm_fabric.observability.dashboards.site_set import build_dashboards
from llm_fabric.observability.rules import build_observability
from llm_fabric.plan.document import Plan, load_plan
from llm_fabric.quota.allocations import build_allocations, build_local_queues
from llm_fabric.serving.waves import mark_waves, workload_waves
from llm_fabric.serving.workloads import build_serving
from llm_fabric.trust.sites import TrustedSite, load_trusted_site

# the order to deploy them in: cluster-wide quota first, then the namespace and its workloads
STACK_ORDER = ("allocations", "serving", "observability")


@dataclass
class StackInputs:
    site: TrustedSite
    site_id: str
    namespace: str
    options: StackOptions
    plan: Plan | None = None

    def the_plan(self) -> Plan:
        if self.plan is None:
            if self.options.plan_file:
                self.plan = load_plan(self.options.plan_file)
            else:
                from llm_fabric.plan.planning import plan_site  # the solver (OR-tools) only when planning here

                self.plan = plan_site(self.site)
        return self.plan.require_complete()


def load_inputs(options: StackOptions, *, site: TrustedSite | None = None, plan: Plan | None = None) -> StackInputs:
    repo = site if site is not None else load_trusted_site(options.site_repo)
    site_id = resolve_site(repo, options.site)
    namespace = repo.config.sites[site_id].cluster.namespace
    return StackInputs(repo, site_id, namespace, options, plan)


def build_stack(stack: str, inputs: StackInputs) -> list[Bundle]:
    """Bundles of one stack, in the order they must be applied."""
    if stack == "allocations":
        return build_allocations(inputs.site, inputs.site_id)
    if stack == "serving":
        plan = inputs.the_plan()
        serving = build_serving(inputs.site, plan, inputs.site_id, inputs.namespace, inputs.options)
        gateway = build_gateway_bundles(inputs.site, plan, inputs.site_id, inputs.namespace)
        gateway += build_counter_bundles(inputs.site, inputs.site_id, inputs.namespace)
        # the namespace comes first; the LocalQueues live in it and the workloads name them
        canary = build_canary(inputs.site, plan, inputs.site_id, inputs.namespace)
        mark_waves(serving, workload_waves(plan, inputs.site_id))
        return serving[:1] + build_local_queues(inputs.site, inputs.namespace) + serving[1:] + canary + gateway
    if stack == "observability":
        observability = build_observability(inputs.site, inputs.site_id, inputs.namespace, inputs.options)
        return observability + build_dashboards(inputs.site, inputs.the_plan(), inputs.site_id, inputs.namespace)
    raise UsageError(f"unknown stack `{stack}`", hint=f"one of {', '.join(STACK_ORDER)}")
