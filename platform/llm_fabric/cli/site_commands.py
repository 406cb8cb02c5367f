"""`fabric init`, `fabric validate`, `fabric schema`."""

from __future__ import annotations

from pathlib import Path

import click

from llm_fabric import wording
from llm_fabric.cli.options import json_option, keyring_option, out_option, site_repo_option
from llm_fabric.cli.output import console, print_json, print_problems

# The site modules (pydantic models, schemas, policies) are imported inside the commands: `fabric --help`
# imports this module, and each command should pay only for its own.


class _InitCommand(click.Command):
    """`fabric init`, whose help lists the shipped examples (read only when the help is shown)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from llm_fabric.init import examples

        super().format_help_text(ctx, formatter)
        with formatter.indentation():
            formatter.write_paragraph()
            formatter.write_text(f"Examples shipped: {', '.join(examples())}.")


@click.command("init", cls=_InitCommand)
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--example", metavar="NAME", help="Start from a shipped example (e.g. cerit-sc).")
@click.option(
    "--enrollment-key",
    "key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the federation's private enrollment key goes (default: beside DIRECTORY; never inside it).",
)
def init_command(directory: Path, example: str | None, key_path: Path | None) -> None:
    """Create a site repo in DIRECTORY (git init, schemas, first commit).

    \b
    Example:
      fabric init ./site --example cerit-sc
    """
    from llm_fabric.init import init_site

    result = init_site(directory, example, key_path)
    what = f"example `{example}`" if example else "empty skeleton"
    console.print(f"created site repo [bold]{result.root}[/] from {what}: {wording.count(len(result.files), 'file')}")
    console.print(f"schemas in {result.root / 'schemas'}; first commit {result.commit or '(none)'}")
    if result.key is not None:
        console.print(
            f"enrollment key {result.key.key_id}: public key in {result.root / 'keys'}, "
            f"private key {result.key.private_path} (mode 0600; keep it out of git)"
        )


@click.command("validate")
@site_repo_option(positional=True)
@json_option("Print the report as JSON.")
@click.option(
    "--base",
    "base_rev",
    metavar="REV",
    help="Judge the change against this git revision: its keys/ are the trust root; key changes are listed.",
)
@keyring_option
def validate_command(site_repo: Path, as_json: bool, base_rev: str | None, keyring: Path | None) -> int:
    """Check a site repo: schema, references, signatures and policies.

    Exit 0 when valid, 2 on schema/reference problems, 3 on policy violations (an untrusted node,
    or with --base a key added or replaced without the endorsement of a key the base trusts).

    \b
    Examples:
      fabric validate -C ./site --json
      fabric validate -C ./site --base main
      fabric validate -C ./site --keyring ~/.config/llm-fabric/keys
    """
    from llm_fabric.validate import validate_site

    report = validate_site(site_repo, base_rev, keyring)
    if as_json:
        print_json(report.as_dict())
        return report.exit_code
    for change in report.key_changes:
        console.print(f"key change: {change}", markup=False)
    print_problems("problems", report.problems)
    print_problems("policy violations", report.violations, style="yellow")
    print_problems("warnings", report.warnings, style="yellow")
    counts = ", ".join(wording.count(v, k.removesuffix("s"), k) for k, v in report.summary.items())
    shown = Path.cwd() if site_repo == Path() else site_repo  # "valid: ." names no folder
    if report.exit_code == 0:
        console.print(f"[green]valid[/]: {shown} ({counts})", markup=True)
    else:
        console.print(f"[red]not valid[/]: {shown}" + (f" ({counts})" if counts else ""), markup=True)
    return report.exit_code


@click.command("schema")
@out_option("Folder to write to.", short=True)
def schema_command(out: Path) -> None:
    """Export the JSON Schema of every site-repo file kind.

    \b
    Example:
      fabric schema -o ./schemas
    """
    from llm_fabric.site.schemas import export_schemas

    for path in export_schemas(out):
        console.print(f"wrote {path}")


commands = [init_command, validate_command, schema_command]
