"""`fabric canary`: the recipe's canary prompts sent to every replica, answers compared; `--record`, `--serve`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llm_fabric.cli.check_commands import endpoints_option, live_plan_option
from llm_fabric.cli.options import json_option, prometheus_option, site_repo_option
from llm_fabric.cli.output import console, err_console, print_json

if TYPE_CHECKING:
    from llm_fabric.live.canary import CanaryRun

# the core is imported inside the command: `fabric --help` imports this module


@click.command("canary")
@site_repo_option()
@live_plan_option
@endpoints_option
@click.option("--prompt", "prompts", multiple=True, metavar="NAME", help="Only this canary prompt (repeatable).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds per prompt.")
@click.option(
    "--metrics",
    "metrics_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the verdicts as Prometheus text (fabric_canary_*) to this file.",
)
@click.option("--record", is_flag=True, help="Write each asked deployment's answers as its reference (a git commit).")
@click.option("--branch", help="With --record: commit to this review branch instead of the checkout.")
@click.option("--serve", "serve_at", metavar="HOST:PORT", help="Run as the prober: serve verdicts, repeat forever.")
@click.option(
    "--every", type=click.FloatRange(min=1), default=60.0, show_default=True, help="With --serve: seconds between runs."
)
@prometheus_option("With --serve: read node-fatal Xid alerts and cordoned nodes here.")
@click.option(
    "--write-token-file",
    "write_token",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --serve: a drain notice (POST) must carry this file's token as a bearer; without it, no writes.",
)
@click.option(
    "--references",
    "references_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Read the recorded references from this folder, not the site repo's canary/ (the rendered prober).",
)
@json_option("Print the verdicts as JSON.")
def canary_command(as_json: bool, **asked: Any) -> None:
    """Send the recipe's canary prompts to every replica directly and compare the answers (exit 3 on a failing replica).

    Each answer is compared with the deployment's recorded reference (canary/DEPLOYMENT.yaml in the
    site repo), with the other replicas of its deployment, and checked for its cheap signals.

    \b
    Examples:
      fabric canary -C ./site --plan plan.json --endpoint qwen3-5/0=http://10.0.0.7:8000 \\
          --endpoint qwen3-5/1=http://10.0.0.8:8000
      fabric canary -C ./site --plan plan.json --endpoint qwen3-5/0=http://10.0.0.7:8000 \\
          --record --branch canary/qwen3-5
      fabric canary -C ./site --plan plan.json --endpoint ... --serve 0.0.0.0:9400 --every 60 \\
          --write-token-file /etc/fabric-canary-token/token
    """
    from llm_fabric.live.canary_command import CanaryRequest, open_canary, record_answers, refuse_failing, serve_canary

    request = CanaryRequest(**asked)
    canary = open_canary(request)
    if request.serve_at is not None:
        serve_canary(canary, _say)
        return
    run = canary.run()
    if as_json:
        print_json(run.as_dict())
    else:
        _print(run)
    if request.record:
        record_answers(canary, run, _say)
        return
    refuse_failing(run)


def _say(line: str) -> None:
    err_console.print(line, markup=False)


def _print(run: CanaryRun) -> None:
    for v in run.replicas:
        if not v.failures:
            seconds = max((a.latency_s for a in v.answers), default=0.0)
            agreed = [
                *(["the reference"] if v.reference_agrees else []),
                *([f"{v.siblings} sibling(s)"] if v.siblings and v.siblings_agree else []),
            ]
            with_what = f"agrees with {' and '.join(agreed)}" if agreed else "no reference or sibling to compare"
            console.print(
                f"{v.name} ({v.url}): pass, {len(v.answers)} prompt(s), {with_what}, slowest {seconds:.2f}s",
                markup=False,
            )
            continue
        console.print(f"{v.name} ({v.url}): FAIL", markup=False)
        for failure in v.failures:
            console.print(f"  {failure}", markup=False)
    for note in run.notes:
        console.print(f"note: {note}", markup=False)
    if run.unchecked:
        console.print(f"not asked (no --endpoint): {', '.join(run.unchecked)}", markup=False)


commands = [canary_command]
