"""`fabric plan`: placement, capacity, allocations and policy verdicts; `--base REV` for PR review."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from llm_fabric.cli.options import json_option, keyring_option, site_repo_option
from llm_fabric.cli.output import console, err_console

if TYPE_CHECKING:  # the solver stack (OR-tools) is imported only when a plan is made
    from llm_fabric.plan.document import Plan, PlanDiff


@click.command("plan")
@site_repo_option(positional=True)
@click.option("--base", "base_rev", metavar="REV", help="Compare with the site repo at this git revision.")
@keyring_option
@json_option("Print the plan document (with its diff) as JSON.")
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the plan document to FILE (read by render --plan, planFile, report --plan).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    help="markdown: one document that fits a pull-request comment.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="Solver time limit (default 10, or $FABRIC_PLAN_TIME_LIMIT).",
)
def plan_command(
    site_repo: Path,
    base_rev: str | None,
    keyring: Path | None,
    as_json: bool,
    output: Path | None,
    fmt: str,
    time_limit: float | None,
) -> None:
    """Plan the placement of every deployment of the site repo (the current folder, or -C DIR).

    Shows, per deployment, the replicas (node and GPUs, TP, quantization), KV pool, sessions at the
    p50/p95 context, decode speed and engine args; per owner the GPUs contributed, dedicated and lent;
    per site the GPUs used and free; the policy verdicts and the solver's status and gap.
    Exit 0 when every policy holds and every target is met, or is missed only while cordoned nodes are out
    of service (DEGRADED: deployable, the shortfall reported); 3 otherwise.

    \b
    Examples:
      fabric plan -C ./site
      fabric plan -C ./site --base main --format markdown > plan-comment.md
      fabric plan -C ./site -o plan.json && fabric render -C ./site --plan plan.json --out ./deploy
      fabric plan --base HEAD~1 --json          # inside the site repo
    """
    from llm_fabric.plan.document import plan_json
    from llm_fabric.review.plan_command import PlanRequest, markdown_comment, plan_request, refuse_undeployable

    reviewed = plan_request(
        PlanRequest(site_repo, base_rev, keyring, output, time_limit),
        on_key_change=lambda change: err_console.print(f"key change: {change.describe()}", markup=False),
    )
    if as_json:
        click.echo(plan_json(reviewed.plan), nl=False)
    elif fmt == "markdown":
        click.echo(markdown_comment(reviewed), nl=False)
    else:
        _print_tables(reviewed.plan, reviewed.diff)
    if output is not None and not as_json:
        console.print(f"plan written to {output}", markup=False)
    refuse_undeployable(reviewed.plan)  # the reasons are in the output above; the edge shows this once, with exit 3


def _print_tables(plan: Plan, diff: PlanDiff | None) -> None:
    from llm_fabric.plan.report import verdict
    from llm_fabric.review.report import sections

    for sec in sections(plan, diff):
        if sec.rows:
            table = Table(title=sec.title, title_justify="left", show_lines=False)
            for h in sec.headers:
                table.add_column(h, overflow="fold")
            for row in sec.rows:
                table.add_row(*row)
            console.print(table)
        else:
            console.print(f"[bold]{sec.title}[/]")
        for note in sec.notes:
            console.print(f"  {note}", markup=False)
    style = "green" if plan.complete else "yellow" if plan.deployable else "red"
    console.print(f"[{style}]plan {verdict(plan)}[/]")


commands = [plan_command]
