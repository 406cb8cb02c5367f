"""`fabric render`: one site, or every site of fabric.yaml from one trusted load of the repo and one plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llm_fabric.deploy.build import STACK_ORDER, StackInputs, load_inputs
from llm_fabric.deploy.crd_validation import CheckReport, CrdSchemas, check_manifests
from llm_fabric.deploy.render import RenderResult, render_stacks
from llm_fabric.kube.options import StackOptions
from llm_fabric.trust.sites import load_trusted_site


@dataclass(frozen=True)
class GitOpsTargets:
    """Where the rendered folders are pulled from: Pulumi Operator stacks and/or a Flux source."""

    operator_repo: str | None = None
    operator_branch: str = "main"
    flux_repo: str | None = None
    flux_branch: str = "main"


@dataclass(frozen=True)
class SiteRender:
    result: RenderResult
    check: CheckReport | None  # with `crds` checking on: what the check found valid


def render_sites(
    options: StackOptions,
    out: Path,
    *,
    all_sites: bool = False,
    stacks: tuple[str, ...] = (),
    targets: GitOpsTargets | None = None,
    check: bool = False,
    crds_dir: Path | None = None,
) -> list[SiteRender]:
    """Render `options.site` (or, with `all_sites`, every site, each into OUT/SITE/) from a trusted site repo.

    With `check` the manifests are validated before a site's files are written (exit 3 names each invalid one).
    """
    targets = targets or GitOpsTargets()
    if all_sites:
        repo = load_trusted_site(options.site_repo)
        first = load_inputs(options.model_copy(update={"site": next(iter(repo.config.sites))}), site=repo)
    else:
        first = load_inputs(options)
    crds = CrdSchemas.load(crds_dir) if crds_dir is not None else None  # a wrong folder fails before writing
    chosen = tuple(s for s in STACK_ORDER if s in stacks) if stacks else STACK_ORDER
    site_ids = list(first.site.config.sites) if all_sites else [first.site_id]
    plan = first.the_plan() if all_sites else None  # one plan for every site: each folder holds its own part
    rendered = []
    for site_id in site_ids:
        inputs: StackInputs = (
            first
            if site_id == first.site_id
            else load_inputs(options.model_copy(update={"site": site_id}), site=first.site, plan=plan)
        )
        if plan is not None:
            inputs.plan = plan
        version = inputs.site.config.sites[site_id].cluster.kubernetes_version
        checked: list[CheckReport] = []

        def run_check(manifests: list[tuple[Path, str]], v: str = version, into: list[CheckReport] = checked) -> None:
            into.append(check_manifests(manifests, v, crds))

        result = render_stacks(
            inputs,
            out,
            stacks=chosen,
            operator_repo=targets.operator_repo,
            operator_branch=targets.operator_branch,
            flux_repo=targets.flux_repo,
            flux_branch=targets.flux_branch,
            check=run_check if check else None,
        )
        rendered.append(SiteRender(result, checked[0] if checked else None))
    return rendered
