"""`fabric render` (the stacks as YAML for GitOps) and `fabric provision` (Ansible on an enrolled node)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llm_fabric import wording
from llm_fabric.cli.options import json_option, out_option, plan_option, site_option, site_repo_option
from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import UsageError

if TYPE_CHECKING:
    from llm_fabric.deploy.crd_validation import CheckReport

# The core is imported inside each command, so that other `fabric` commands do not pay for it.
# llm_fabric.deploy.build.STACK_ORDER, spelled out to keep that import out of start-up
# (tests/cli/test_startup.py checks that the two agree).
STACKS = ("allocations", "serving", "observability")


@click.command("render")
@site_repo_option(positional=True)
@out_option("Folder to write.")
@site_option("Site whose cluster to render (default: the only site).")
@click.option("--all-sites", is_flag=True, help="Render every site of fabric.yaml, each into OUT/SITE/, from one plan.")
@plan_option("Plan JSON to deploy.", must_exist=False)
@click.option("--stack", "stacks", multiple=True, type=click.Choice(STACKS), help="Only these stacks (repeatable).")
@click.option("--operator-repo", metavar="GIT_URL", help="Also write Pulumi Operator Stack resources for this remote.")
@click.option("--operator-branch", default="main", show_default=True, help="Branch the operator deploys.")
@click.option(
    "--flux-repo",
    metavar="GIT_URL",
    help="Also write OUT/SITE/flux/: a Flux GitRepository + Kustomization pulling only that site's folder.",
)
@click.option("--flux-branch", default="main", show_default=True, help="Branch Flux pulls.")
@click.option(
    "--check",
    is_flag=True,
    help="Validate what was written: Kubernetes kinds strictly for the site's cluster.kubernetes_version, "
    "custom resources against the CRDs in --crds. Exit 3 on an invalid manifest.",
)
@click.option(
    "--crds",
    "crds_dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Folder of CustomResourceDefinition YAML files (Kueue, Prometheus Operator, ...) for --check.",
)
@json_option("Print what was written as JSON.")
def render_command(
    site_repo: Path,
    out: Path,
    site_name: str | None,
    all_sites: bool,
    plan_file: Path | None,
    stacks: tuple[str, ...],
    operator_repo: str | None,
    operator_branch: str,
    flux_repo: str | None,
    flux_branch: str,
    check: bool,
    crds_dir: Path | None,
    as_json: bool,
) -> None:
    """Write the serving, allocations and observability stacks of a site repo as YAML.

    One file per resource under OUT/SITE/STACK/, with kustomization.yaml files for Argo CD or
    Flux; the same resources `pulumi up` creates. Without --plan the site repo is planned afresh;
    an incomplete plan is refused (exit 3). --check validates every manifest before any file is
    written (exit 3 naming the file, line and field of each invalid one; nothing is written then).

    \b
    Examples:
      fabric render -C ./site --out ./site/deploy
      fabric render -C ./site --out ./site/deploy --check --crds ./crds
      fabric render -C ./site --out ./site/deploy --operator-repo https://git.example/fed/site.git
      fabric render -C ./site --out ./site/deploy --all-sites --flux-repo ssh://git@git.example/fed/site.git
    """
    from llm_fabric.deploy.site_renders import GitOpsTargets, render_sites
    from llm_fabric.kube.options import StackOptions

    if crds_dir is not None and not check:
        raise UsageError("--crds is used by --check", hint="add --check")
    if all_sites and site_name is not None:
        raise UsageError("--site and --all-sites exclude each other", hint="pass one of them")
    rendered = render_sites(
        StackOptions(site_repo=site_repo, site=site_name, plan_file=plan_file),
        out,
        all_sites=all_sites,
        stacks=stacks,
        targets=GitOpsTargets(operator_repo, operator_branch, flux_repo, flux_branch),
        check=check,
        crds_dir=crds_dir,
    )
    if as_json:
        dicts = [r.result.as_dict() | ({"check": r.check.as_dict()} if r.check is not None else {}) for r in rendered]
        print_json(dicts if all_sites else dicts[0])
        return
    for one in rendered:
        result, report = one.result, one.check
        counts = ", ".join(f"{n} {stack}" for stack, n in result.objects.items())
        console.print(f"rendered site [bold]{result.site}[/] into {out / result.site}: {counts} objects")
        console.print(
            f"{wording.count(len(result.files), 'file')} written or unchanged, "
            f"{wording.count(len(result.removed), 'stale file')} removed"
        )
        for path in result.removed:
            console.print(f"  removed {path}", markup=False)
        if report is not None:
            _print_check(report)


def _print_check(report: CheckReport) -> None:
    custom = (
        f"{report.custom} custom resources against the CRDs in {report.crds}"
        if report.crds is not None
        else f"{report.custom_unchecked} custom resources not checked (no --crds DIR)"
    )
    console.print(f"valid: {report.core} Kubernetes manifests ({report.kubernetes_version}, strict), {custom}")


@click.command("provision")
@click.argument("node")
@site_repo_option()
@click.option("--host", "address", metavar="ADDR", help="Address to reach the node (default: its hostname).")
@click.option("--ssh-user", help="SSH user.")
@click.option("--ssh-port", type=int, help="SSH port.")
@click.option("--ssh-key", type=click.Path(dir_okay=False, path_type=Path), help="SSH private key.")
@click.option("--connection", type=click.Choice(["ssh", "local"]), default="ssh", show_default=True)
@click.option(
    "--mode",
    type=click.Choice(["full", "files"]),
    default="full",
    show_default=True,
    help="files: manage only files and the node's labels/taints; install nothing.",
)
@click.option("--check", is_flag=True, help="Dry run (ansible --check --diff).")
@plan_option(
    "Check only the weights.lock checkpoints the plan's replicas on NODE load (default: every one).", must_exist=False
)
@click.option("-e", "--extra-var", "extra", multiple=True, metavar="KEY=VALUE", help="Override a role variable.")
@json_option()
def provision_command(as_json: bool, **asked: Any) -> None:
    """Run playbooks/provision.yml for an enrolled NODE: preflight, GPU runtime, kernels, weights cache, join.

    Variables come from the node manifest and the kernel matrix; -e overrides a role's variable
    (see the role defaults under playbooks/roles/). Exit 0 when the playbook succeeded.

    \b
    Examples:
      fabric provision hgx-h200-ceitec --site-repo ./site --check
      fabric provision hgx-h200-ceitec --site-repo ./site --plan plan.json   # its replicas' weights only
      fabric provision dgx-b200-01 --site-repo ./site -e fabric_join_command="kubeadm join ..."
    """
    from llm_fabric.nodes.provision_command import ProvisionRequest, provision, refuse_failed

    request = ProvisionRequest(**asked)
    result = provision(request)
    if as_json:
        print_json(result.as_dict())
    else:
        console.print(
            f"provision.yml on {request.node}: {result.status}, {result.changed} changed"
            + (" (check mode)" if request.check else "")
        )
        for failure in result.failures:
            console.print(f"  failed: {failure}", markup=False)
    refuse_failed(result, request.node)


commands = [render_command, provision_command]
