"""`fabric enroll`, `fabric facts`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from llm_fabric.cli.options import json_option, key_option, out_option, site_option, site_repo_option
from llm_fabric.cli.output import console, err_console, print_json
from llm_fabric.errors import EXIT_OK, EXIT_POLICY, UsageError

if TYPE_CHECKING:
    from llm_fabric.enrollment.enroll import EnrollRequest, EnrollResult

# The core (pydantic models, Ansible, cryptography) is imported inside each command: `fabric --help`
# imports every command module, and only the command that runs should pay for its imports.

_STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "red"}
_TIER_STYLE = {"full": "bold green", "limited": "bold yellow", "rejected": "bold red"}

# absolute: the registry joins paths onto it and git runs inside it (a relative ./site was staged as site/site/...)
site_repo = site_repo_option(absolute=True)


def _connection_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option("--connection", type=click.Choice(["ssh", "local"]), default="ssh", show_default=True),
            click.option("--ssh-user", metavar="U", help="SSH user (default: yours / ssh config)."),
            click.option("--ssh-port", metavar="P", type=int, help="SSH port (default 22)."),
            click.option("--ssh-key", metavar="K", type=click.Path(dir_okay=False, path_type=Path), help="SSH key."),
        ]
    ):
        func = option(func)
    return func


def _read_probe_options(func: Any) -> Any:
    # the defaults are enrollment.facts' DEFAULT_MODELS_DIR / DEFAULT_READ_PROBE_MIB (not imported: see above)
    func = click.option(
        "--read-probe-mib",
        metavar="N",
        type=click.IntRange(min=0),
        default=512,
        show_default=True,
        help="Size of the file written and read back to measure the model cache's read speed; 0: do not measure.",
    )(func)
    return click.option(
        "--model-cache",
        metavar="DIR",
        default="/var/lib/llm-fabric/models",
        show_default=True,
        help="The node's model cache folder (its nearest existing parent before provisioning): whose disk is measured.",
    )(func)


class _Progress:
    """A spinner while Ansible runs (on stderr, so --json output stays clean)."""

    def __init__(self, host: str) -> None:
        self.status = console.status(f"gathering facts from {host} with Ansible ...") if console.is_terminal else None

    def __enter__(self) -> _Progress:
        if self.status is not None:
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(None, None, None)

    def __call__(self, host: str, what: str) -> None:
        if self.status is not None:
            self.status.update(f"gathering facts with Ansible: {what}")


def result_json(result: EnrollResult) -> dict[str, object]:
    v = result.verdict
    reg = result.registration
    return {
        "node": result.name,
        "tier": v.tier,
        "checks": [c.model_dump(mode="json") for c in v.checks],
        "gpus": {
            "model": v.gpus.model,
            "count": v.gpus.count,
            "memory_gb_total": v.gpus.memory_gb_total,
            "compute_capability": v.gpus.compute_capability,
        },
        "manifest": str(reg.path) if reg is not None else None,
        "commit": reg.commit if reg is not None else None,
        "branch": reg.branch if reg is not None else None,
        "changes": reg.changes if reg is not None else [],
    }


def print_verdict(result: EnrollResult) -> None:
    v = result.verdict
    table = Table(title=f"admission of {result.name}", title_justify="left")
    for col in ("check", "status", "value", "threshold", "detail"):
        table.add_column(col)
    for c in v.checks:
        style = _STATUS_STYLE[c.status]
        value = "" if c.value is None else str(c.value)
        threshold = "" if c.threshold is None else str(c.threshold)
        table.add_row(c.id, f"[{style}]{c.status}[/]", value, threshold, c.detail)
    console.print(table)
    g = v.gpus
    console.print(
        f"GPUs: {g.count} x {g.product or '-'} ({g.model or 'not in catalog'}), {g.memory_gb_total} GB in all, "
        f"compute capability {g.compute_capability or '-'}"
    )
    console.print(f"tier: [{_TIER_STYLE[v.tier]}]{v.tier}[/]")
    for note in result.inventory.notes:
        console.print(f"note: {note}", markup=False)


@click.command("enroll")
@click.argument("host", metavar="HOST|NAME")
@site_repo
@click.option("--owner", required=True, metavar="GROUP", help="Contributing tenant that owns the machine.")
@site_option("Site (in fabric.yaml) where the machine runs.", required=True)
@click.option(
    "--name",
    metavar="NODE",
    help="Node name (default: NAME with --facts, else the machine's short hostname).",
)
@_connection_options
@_read_probe_options
@click.option(
    "--facts", "facts_file", type=click.Path(dir_okay=False, path_type=Path), help="Decide from a saved bundle."
)
@key_option
@click.option(
    "--dry-run", is_flag=True, help="Run every check the real run does (same verdict, same exit code); write nothing."
)
@click.option(
    "--branch",
    metavar="BRANCH",
    help="Commit the manifest onto BRANCH (created from HEAD) for review, leaving the checkout as it is.",
)
@json_option("Print the verdict as JSON.")
def enroll_command(host: str, site_repo: Path, **opts: Any) -> int:
    """Gather HOST's facts with Ansible, decide admission, and register a signed node manifest.

    With --facts FILE the facts come from a saved bundle (`fabric facts`) and the argument is the node's
    NAME. Exit 0 when admitted (full or limited tier), 3 when rejected or when its GPUs are registered
    under another node, 2 on usage or connection errors; --dry-run gives the same verdict and exit code.

    \b
    Examples:
      fabric enroll gpu7.example.org --site-repo ./site --owner cerit-sc --site brno --ssh-user root
      fabric enroll gpu7.example.org --site-repo ./site --owner cerit-sc --site brno --branch enroll/gpu7
      fabric enroll localhost --connection local --site-repo ./site --owner cerit-sc --site brno --dry-run
      fabric enroll gpu7 --facts gpu7.facts.json --site-repo ./site --owner cerit-sc --site brno --json
    """
    from llm_fabric.enrollment.enroll import EnrollRequest, enroll

    as_json = opts.pop("as_json")
    request = EnrollRequest(host=host, site_root=site_repo, site=opts.pop("site_name"), **opts)
    _warn_off_main(request)
    with _Progress(host) as progress:
        result = enroll(request, progress=None if opts["facts_file"] else progress)
    if as_json:
        print_json(result_json(result))
    else:
        print_verdict(result)
        _print_outcome(result, request.dry_run)
    return EXIT_OK if result.verdict.admitted else EXIT_POLICY


def _warn_off_main(request: EnrollRequest) -> None:
    from llm_fabric.site.gitrepo import off_main_branch
    from llm_fabric.site.root import not_a_site_repo

    if request.dry_run or request.branch is not None or not_a_site_repo(request.site_root) is not None:
        return
    branch = off_main_branch(request.site_root)
    if branch is not None:
        err_console.print(
            f"note: the site repo has branch `{branch}` checked out, not main: the node is committed there; "
            f"to enrol it on main, check main out first (git -C {request.site_root} checkout main) "
            "or pass --branch main",
            markup=False,
        )


def _print_outcome(result: EnrollResult, dry_run: bool) -> None:
    reg = result.registration
    if not result.verdict.admitted:
        failed = ", ".join(c.id for c in result.verdict.checks if c.status == "fail")
        console.print(f"[red]rejected[/]: failed {failed}; nothing was written")
    elif dry_run or reg is None:
        console.print("dry run: nothing was written")
    elif reg.branch is not None:
        console.print(
            f"committed {reg.path.name} to branch {reg.branch} (commit {reg.commit or 'none: unchanged'}); "
            "the checkout is unchanged: merge the branch once reviewed",
            markup=False,
        )
    else:
        verb = "updated" if reg.previous is not None else "registered"
        console.print(f"{verb} {reg.path} (commit {reg.commit or 'none: unchanged'})")
        for change in reg.changes:
            console.print(f"  changed: {change}", markup=False)


@click.command("facts")
@click.argument("host", required=False)
@out_option("Bundle file.", folder=False, short=True)
@click.option(
    "--sample",
    metavar="NAME",
    help="Write the bundle of a sample machine shipped with the fabric (h100x8: 8 x H100 SXM, h200x4, "
    "mi355x8; for the tiers: l40sx8, a100x4, mi300x8cpx) instead of gathering; HOST names it (default: NAME).",
)
@_connection_options
@_read_probe_options
def facts_command(
    host: str | None,
    out: Path,
    sample: str | None,
    connection: str,
    ssh_user: str | None,
    ssh_port: int | None,
    ssh_key: Path | None,
    model_cache: str,
    read_probe_mib: int,
) -> None:
    """Only gather HOST's facts into a bundle, for `fabric enroll --facts` on another machine.

    With --sample NAME, write a sample machine's bundle instead (no machine needed): the tour enrols it.

    \b
    Example:
      fabric facts gpu7.example.org --ssh-user root -o gpu7.facts.json
      fabric facts gpu7 --sample h100x8 -o gpu7.facts.json
    """
    from llm_fabric.enrollment.enroll import EnrollRequest, gather_one
    from llm_fabric.enrollment.facts import save_bundle
    from llm_fabric.enrollment.samples import sample_bundle

    if sample is not None:
        bundle = sample_bundle(sample, host or sample)
        save_bundle(bundle, out)
        console.print(f"wrote {out}: sample machine {sample} as host {bundle.host} (not gathered)", markup=False)
        return
    if host is None:
        raise UsageError("fabric facts: no HOST given", hint="give HOST to gather from, or --sample NAME")
    request = EnrollRequest(
        host=host,
        site_root=Path("."),
        owner="",
        site="",
        connection=connection,  # type: ignore[arg-type]
        ssh_user=ssh_user,
        ssh_port=ssh_port,
        ssh_key=ssh_key,
        model_cache=model_cache,
        read_probe_mib=read_probe_mib,
    )
    with _Progress(host) as progress:
        bundle = gather_one(request, progress)
    save_bundle(bundle, out)
    ran = sum(1 for p in bundle.probes.values() if p.rc == 0)
    console.print(f"wrote {out}: {ran} of {len(bundle.probes)} probes answered")


commands = [enroll_command, facts_command]
