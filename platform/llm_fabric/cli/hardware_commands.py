"""`fabric gpus`: the GPU catalog and the tier a usual machine of each GPU gets at enrolment."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from llm_fabric.cli.options import json_option
from llm_fabric.cli.output import console, print_json

_TIER_STYLE = {"full": "bold green", "limited": "bold yellow", "rejected": "bold red"}


@click.command("gpus")
@click.option("--markdown", is_flag=True, help="Print the table as Markdown (the table in docs/enroll.md).")
@click.option(
    "--update-doc",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rewrite the generated GPU table of this Markdown file (between its gpu-table markers).",
)
@json_option("Rows as JSON.")
def gpus(markdown: bool, update_doc: Path | None, as_json: bool) -> None:
    """The GPUs the catalog knows and the tier `fabric enroll` gives a usual machine of each.

    Each row is decided by admission on what such a machine reports (the catalog's GPUs, drivers at
    the kernel matrix's floors), so it shows what the catalog, the kernel matrix and the admission
    profile say together.

    Example: fabric gpus --update-doc docs/enroll.md
    """
    from llm_fabric.enrollment.tier_table import render_markdown, tier_rows, update_document

    rows = tier_rows()
    if update_doc is not None:
        changed = update_document(update_doc, render_markdown(rows))
        console.print(f"{update_doc}: GPU table {'updated' if changed else 'already current'} ({len(rows)} rows)")
        return
    if markdown:
        click.echo(render_markdown(rows), nl=False)
        return
    if as_json:
        print_json(
            [
                {"gpu": r.gpu.id, "product": r.gpu.product_names[0], "count": r.count, "tier": r.verdict.tier,
                 "fp8": r.gpu.fp8, "reason": r.reason}
                for r in rows
            ]
        )  # fmt: skip
        return
    table = Table("GPU", "arch", "memory", "FP8", "machine", "tier", "why not full")
    for r in rows:
        tier = f"[{_TIER_STYLE[r.verdict.tier]}]{r.verdict.tier}[/]"
        memory = f"{r.gpu.nominal_memory_gb:g} GB {r.gpu.memory_type}"
        table.add_row(
            r.gpu.id, r.gpu.architecture, memory, "yes" if r.gpu.fp8 else "no", f"{r.count} x", tier, r.reason
        )
    console.print(table)


commands = [gpus]
