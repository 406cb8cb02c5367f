"""`fabric plan`: placement, capacity, allocations and policy verdicts; `--base REV` for PR review."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import EXIT_OK, EXIT_POLICY

if TYPE_CHECKING:  # the solver stack (OR-tools) is imported only when a plan is made
    from llm_fabric.deploy.plan import Plan
    from llm_fabric.deploy.plan_diff import PlanDiff


@click.command("plan")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--base", "base_rev", metavar="REV", help="Compare with the site repo at this git revision.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and the diff) as JSON.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
              help="markdown: one document that fits a pull-request comment.")
@click.option("--time-limit", type=click.FloatRange(min=0.1), default=None, metavar="SECONDS",
              help="Solver time limit (default 10, or $FABRIC_PLAN_TIME_LIMIT).")
def plan_command(directory: Path, base_rev: str | None, as_json: bool, fmt: str, time_limit: float | None) -> int:
    """Plan the placement of every deployment of the site repo in DIRECTORY.

    Shows, per deployment, the replicas (node and GPUs, TP, quantization), KV pool, sessions at the
    p50/p95 context, decode speed and engine args; per owner the GPUs contributed, dedicated and lent;
    per site the GPUs used and free; the policy verdicts and the solver's status and gap.
    Exit 0 when every policy holds and every target is met, 3 otherwise.

    \b
    Examples:
      fabric plan ./site
      fabric plan ./site --base main --format markdown > plan-comment.md
      fabric plan ./site --base HEAD~1 --json
    """
    from llm_fabric.deploy.plan_diff import diff_plans
    from llm_fabric.deploy.plan_report import markdown
    from llm_fabric.deploy.planning import plan_site
    from llm_fabric.deploy.revision import checkout_revision
    from llm_fabric.site.loader import load_site

    site = load_site(directory)
    diff = None
    if base_rev is not None:
        with tempfile.TemporaryDirectory(prefix="fabric-base-") as tmp:
            base_site = load_site(checkout_revision(directory, base_rev, Path(tmp)))
            base_plan = plan_site(base_site, time_limit_s=time_limit)
        plan = plan_site(site, base_plan, time_limit_s=time_limit)
        diff = diff_plans(base_plan, plan, base_rev)
    else:
        plan = plan_site(site, time_limit_s=time_limit)
    if as_json:
        print_json({"plan": plan.model_dump(mode="json"), "diff": diff.model_dump(mode="json") if diff else None,
                    "complete": plan.complete})
    elif fmt == "markdown":
        click.echo(markdown(plan, diff), nl=False)
    else:
        _print_tables(plan, diff)
    return EXIT_OK if plan.complete else EXIT_POLICY


def _print_tables(plan: Plan, diff: PlanDiff | None) -> None:
    from llm_fabric.deploy.plan_report import sections

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
    style = "green" if plan.complete else "red"
    console.print(f"[{style}]plan {'complete' if plan.complete else 'INCOMPLETE'}[/]")


commands = [plan_command]
