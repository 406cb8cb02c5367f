"""`fabric bench --emit inference-perf`: load-test configs for a real GPU site, made from the plan."""

from __future__ import annotations

from pathlib import Path

import click

from llm_fabric.cli.options import (
    json_option,
    out_option,
    plan_option,
    prometheus_option,
    site_option,
    site_repo_option,
)
from llm_fabric.cli.output import console, print_json

# The site loader, the plan and the recipes are imported inside the command: every `fabric`
# invocation that lists commands imports this module.


@click.command("bench")
@site_repo_option()
@click.option(
    "--emit",
    type=click.Choice(["inference-perf"]),
    required=True,
    help="The load tool whose config to write: inference-perf (kubernetes-sigs, the wg-serving tool).",
)
@plan_option("The plan document (`fabric plan -o FILE`) the site runs.", required=True)
@site_option("The site whose deployments to load (default: the only one).")
@click.option("--deployment", "deployments", multiple=True, metavar="NAME", help="Only these (repeatable).")
@click.option(
    "--via",
    type=click.Choice(["engine", "gateway"]),
    default="engine",
    show_default=True,
    help="engine: each deployment's Service at the site; gateway: the tenant gateway (a tenant key at run time).",
)
@click.option("--api", type=click.Choice(["chat", "completion"]), default="chat", show_default=True)
@click.option(
    "--data",
    type=click.Choice(["shared_prefix", "synthetic"]),
    default="shared_prefix",
    show_default=True,
    help="shared_prefix: one system prompt of half the p50 shared by all requests; synthetic: whole prompts.",
)
@click.option("--stage-seconds", type=click.IntRange(10, 86_400), default=180, show_default=True)
@prometheus_option("The Prometheus that scrapes the site's engines, as inference-perf will reach it.", required=True)
@out_option("Folder for the configs.")
@json_option("Print what was written as JSON.")
def bench_command(
    site_repo: Path,
    emit: str,
    plan_file: Path,
    site_name: str | None,
    deployments: tuple[str, ...],
    via: str,
    api: str,
    data: str,
    stage_seconds: int,
    prometheus_url: str,
    out: Path,
    as_json: bool,
) -> None:
    """Write a load-test config per deployment of a site, its rates and prompt lengths from the plan.

    Each deployment gets inference-perf-NAME.yaml: Poisson stages at 25-125 % of the rate the plan
    says its replicas sustain, prompts log-normal with the plan's p50/p95, outputs at 17:1, the
    engines' Prometheus series (docs/gateway.md, "Load tests on a real site").

    \b
    Example:
      fabric bench -C ./site --emit inference-perf --plan plan.json --site brno \\
        --prometheus http://prometheus-operated.monitoring.svc:9090 --out ./bench
    """
    from llm_fabric.loadtest.command import BenchRequest, write_bench

    request = BenchRequest(
        site_repo=site_repo,
        plan_file=plan_file,
        site_name=site_name,
        deployments=deployments,
        via=via,  # type: ignore[arg-type]
        api=api,  # type: ignore[arg-type]
        data=data,  # type: ignore[arg-type]
        stage_seconds=stage_seconds,
        prometheus_url=prometheus_url,
        out=out,
    )
    written = write_bench(request)
    if as_json:
        print_json(written.as_json())
        return
    for line in written.lines():
        console.print(line, markup=False)


commands = [bench_command]
