"""`fabric render` (the stacks as YAML for GitOps) and `fabric provision` (Ansible on an enrolled node)."""

from __future__ import annotations

from pathlib import Path

import click

from llm_fabric.cli.output import console, print_json
from llm_fabric.deploy.build import STACK_ORDER, load_inputs
from llm_fabric.deploy.options import StackOptions
from llm_fabric.deploy.render import render_stacks


@click.command("render")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder to write.")
@click.option("--site", "site", metavar="ID", help="Site whose cluster to render (default: the only site).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path), help="Plan JSON to deploy.")
@click.option(
    "--stack", "stacks", multiple=True, type=click.Choice(STACK_ORDER), help="Only these stacks (repeatable)."
)
@click.option("--operator-repo", metavar="GIT_URL", help="Also write Pulumi Operator Stack resources for this remote.")
@click.option("--operator-branch", default="main", show_default=True, help="Branch the operator deploys.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def render_command(
    directory: Path,
    out: Path,
    site: str | None,
    plan_file: Path | None,
    stacks: tuple[str, ...],
    operator_repo: str | None,
    operator_branch: str,
    as_json: bool,
) -> None:
    """Write the serving, allocations and observability stacks of a site repo as YAML.

    One file per resource under OUT/SITE/STACK/, with kustomization.yaml files for Argo CD or
    Flux; the same resources `pulumi up` creates. Without --plan the site repo is planned afresh;
    an incomplete plan is refused (exit 3).

    \b
    Examples:
      fabric render ./site --out ./site/deploy
      fabric render ./site --out ./site/deploy --operator-repo https://git.example/fed/site.git
    """
    options = StackOptions(site_repo=directory, site=site, plan_file=plan_file)
    inputs = load_inputs(options)
    chosen = tuple(s for s in STACK_ORDER if s in stacks) if stacks else STACK_ORDER
    result = render_stacks(inputs, out, stacks=chosen, operator_repo=operator_repo, operator_branch=operator_branch)
    if as_json:
        print_json(result.as_dict())
        return
    counts = ", ".join(f"{n} {stack}" for stack, n in result.objects.items())
    console.print(f"rendered site [bold]{result.site}[/] into {out / result.site}: {counts} objects")
    console.print(f"{len(result.files)} files written or unchanged, {len(result.removed)} stale files removed")
    for path in result.removed:
        console.print(f"  removed {path}", markup=False)


commands = [render_command]
