"""Spare capacity: which spares the policies ask for, which a cordoned node has called on, and the check
of the policy files' names (`fabric validate`).

A spare is held by the plan as a replica that serves nothing (`plan.planning`): one node's GPUs of a GPU
model, or one more replica's GPUs of a deployment. A cordoned node that the spare covers releases it:
N+1 absorbs one fault, and the re-plan gives the cordoned node's replicas the spare's seat first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from llm_fabric.documents import suggest
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import PolicySet
from llm_fabric.site.validation import Finding

SpareScope = Literal["gpu_model", "deployment"]


@dataclass(frozen=True)
class SpareAsk:
    scope: SpareScope
    name: str  # the GPU model or the deployment
    released_by: tuple[str, ...] = ()  # cordoned nodes it covers: the spare is theirs now, not held

    @property
    def key(self) -> str:
        """The spare's name in the solver and the plan: not a deployment name (those have no `/`)."""
        return f"spare/{self.scope}/{self.name}"


def spare_asks(site: SiteRepo, policies: PolicySet, waiting: Callable[[str], list[str]]) -> list[SpareAsk]:
    """Every `n+1` of the policies, with the cordoned nodes that released it. `waiting(deployment)`:
    the cordoned nodes that could run it were they in service (`gate.waiting_for_nodes`)."""
    spares = policies.spares
    if spares is None:
        return []
    cordoned = sorted(n for n, node in site.nodes.items() if node.status == "cordoned")
    out: list[SpareAsk] = []
    for model, level in sorted(spares.gpu_models.items()):
        if level == "n+1":
            hit = tuple(n for n in cordoned if site.nodes[n].gpus.catalog_id == model)
            out.append(SpareAsk("gpu_model", model, hit))
    for dep, level in sorted(spares.deployments.items()):
        if level == "n+1" and dep in site.deployments and site.deployments[dep].replicas != 0:
            out.append(SpareAsk("deployment", dep, tuple(waiting(dep))))
    return out


def _check_names(site: SiteRepo) -> list[Finding]:
    from llm_fabric.hardware.catalog import load_gpu_catalog

    gpu_ids = sorted(load_gpu_catalog().ids())
    deployments = sorted(site.deployments)
    out: list[Finding] = []
    for file, pol in sorted(site.site_policies.items()):
        if pol.spares is None:
            continue
        path = site.path_of("policies", file)
        known: list[tuple[str, dict[str, str], list[str]]] = [
            ("GPU model", dict(pol.spares.gpu_models), gpu_ids),
            ("deployment", dict(pol.spares.deployments), deployments),
        ]
        for (kind, entries, names), section in zip(known, ("gpu_models", "deployments"), strict=True):
            for name in entries:
                if name in names:
                    continue
                guess = suggest(name, names)
                hint = f"did you mean `{guess}`?" if guess else f"known: {', '.join(names) or '(none)'}"
                problem = site.problem(path, ("spares", section, name), f"unknown {kind} `{name}`", hint)
                out.append(Finding(severity="config", problem=problem))
    return out


site_checks: list[Callable[[SiteRepo], list[Finding]]] = [_check_names]
