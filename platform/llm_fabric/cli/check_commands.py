"""`fabric check live`: every engine asked for the configuration it runs, compared with the plan."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llm_fabric.cli.options import json_option, plan_option, site_repo_option
from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import PolicyRefusal, UsageError

# the core is imported inside the command: `fabric --help` imports this module


@click.group("check")
def check_group() -> None:
    """Checks of the running fabric against its plan.

    \b
    Examples:
      fabric check live -C ./site --plan plan.json --endpoint qwen3-5/0=http://10.0.0.7:8000
    """


# what `check live` and `canary` share: the plan and each replica's own engine
live_plan_option = plan_option("Plan from `fabric plan -o`: what each replica should run.", required=True)
endpoints_option = click.option(
    "--endpoint",
    "endpoints",
    multiple=True,
    metavar="REPLICA=URL",
    help="A replica (DEPLOYMENT/INDEX) and its engine's own URL (not the gateway's); repeat for each replica.",
)


@check_group.command("live")
@site_repo_option()
@live_plan_option
@endpoints_option
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Seconds per request.")
@click.option(
    "--metrics",
    "metrics_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the findings as Prometheus text (fabric_replica_config_drift) to this file.",
)
@json_option("Print the findings as JSON.")
def live_command(
    site_repo: Path,
    plan_file: Path,
    endpoints: tuple[str, ...],
    timeout: float,
    metrics_file: Path | None,
    as_json: bool,
) -> None:
    """Ask every engine for its configuration and print each difference from the plan (exit 3 on drift).

    \b
    Example:
      fabric check live -C ./site --plan plan.json --endpoint qwen3-5/0=http://10.0.0.7:8000/v1
    """
    from llm_fabric.atomicio import write_atomic
    from llm_fabric.live.drift import check_live, endpoint_pairs, endpoints_of, exposition
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import load_site

    site = load_site(site_repo)
    plan = load_plan(plan_file)
    if plan.federation != site.config.federation.name:
        raise UsageError(
            f"{plan_file} is a plan of `{plan.federation}`, not of `{site.config.federation.name}` ({site_repo})",
            hint=f"plan this site repo: `fabric plan -C {site_repo} -o FILE`",
        )
    result = check_live(plan, endpoints_of(plan, endpoint_pairs(endpoints)), timeout=timeout)
    if metrics_file is not None:
        write_atomic(metrics_file, exposition(result))
    if as_json:
        print_json(result.as_dict())
    else:
        for r in result.replicas:
            if not r.drifts:
                console.print(f"{r.name} ({r.engine}, {r.url}): as planned ({', '.join(r.agreeing)})", markup=False)
                continue
            console.print(f"{r.name} ({r.engine}, {r.url}): {len(r.drifts)} difference(s) from the plan", markup=False)
            for d in r.drifts:
                console.print(
                    f"  {d.field}: planned {json.dumps(d.planned)}, engine reports {json.dumps(d.reported)}",
                    markup=False,
                )
        if result.unchecked:
            console.print(f"not asked (no --endpoint): {', '.join(result.unchecked)}", markup=False)
    drifting = [r.name for r in result.replicas if r.drifts]
    if drifting:
        raise PolicyRefusal(
            f"{len(drifting)} replica(s) do not run what the plan says: {', '.join(drifting)}",
            hint="redeploy the plan (`fabric render --plan`), or re-plan what the replica should run",
        )


commands = [check_group]
