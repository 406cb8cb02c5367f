"""`fabric canary`: the recipe's canary prompts sent to every replica, answers compared; `--record`, `--serve`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_fabric.cli.check_commands import endpoint_pairs, endpoints_option, live_plan_option
from llm_fabric.cli.options import json_option, prometheus_option, site_repo_option
from llm_fabric.cli.output import console, err_console, print_json
from llm_fabric.errors import PolicyRefusal, UsageError

if TYPE_CHECKING:
    from llm_fabric.live.canary import CanaryRun
    from llm_fabric.plan.document import Plan

# the core is imported inside the command: `fabric --help` imports this module


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--serve `{value}` is not HOST:PORT", hint="e.g. --serve 0.0.0.0:9400")
    return host or "0.0.0.0", int(port)


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
def canary_command(
    site_repo: Path,
    plan_file: Path,
    endpoints: tuple[str, ...],
    prompts: tuple[str, ...],
    timeout: float,
    metrics_file: Path | None,
    record: bool,
    branch: str | None,
    serve_at: str | None,
    every: float,
    prometheus_url: str | None,
    write_token: Path | None,
    references_dir: Path | None,
    as_json: bool,
) -> None:
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
    from llm_fabric.live import canary as core
    from llm_fabric.live.drift import endpoints_of
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import load_site

    if branch is not None and not record:
        raise UsageError("--branch goes with --record", hint="add --record, or leave --branch out")
    if record and (serve_at is not None or references_dir is not None):
        raise UsageError("--record writes the site repo's canary/", hint="leave out --serve and --references")
    plan = load_plan(plan_file)
    # the rendered prober has the plan and the references, not the site repo
    root: Path | None = None
    if references_dir is None:
        site = load_site(site_repo)
        root = site.root
        if plan.federation != site.config.federation.name:
            raise UsageError(
                f"{plan_file} is a plan of `{plan.federation}`, not of `{site.config.federation.name}` ({site_repo})",
                hint=f"plan this site repo: `fabric plan -C {site_repo} -o FILE`",
            )
    folder = references_dir if references_dir is not None else core.references_dir(site.root)
    urls = endpoints_of(plan, endpoint_pairs(endpoints))
    only = list(prompts) or None

    def once() -> core.CanaryRun:
        # --record judges by agreement and signals only: the reference is what it replaces
        refs = {} if record else core.load_references(folder, sorted(plan.deployments))
        return core.run_canary(plan, urls, refs, timeout=timeout, only=only)

    if serve_at is not None:
        _serve(root, plan, once, _address(serve_at), every, prometheus_url, metrics_file, write_token)
        return
    run = once()
    if metrics_file is not None:
        from llm_fabric.atomicio import write_atomic

        write_atomic(metrics_file, core.exposition(run))
    if as_json:
        print_json(run.as_dict())
    else:
        _print(run)
    if record:
        assert root is not None  # --record without --references
        _record(root.resolve(), plan, run, branch)  # git runs in the repo: its paths must not be relative
        return
    if run.failing:
        first = run.failing[0]
        raise PolicyRefusal(
            f"{len(run.failing)} replica(s) fail the canary: "
            + "; ".join(f"{v.name} ({v.failures[0]})" for v in run.failing),
            hint=f"the prober (`fabric canary --serve`) keeps {first.name} out of the gateway while it fails; "
            "redeploy it, or after a deliberate change record the new answers (`fabric canary --record`)",
        )


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


def _record(root: Path, plan: Plan, run: CanaryRun, branch: str | None) -> None:
    from llm_fabric.live.canary import CANARY_DIR, reference_from, reference_text
    from llm_fabric.site import gitrepo

    deployments = sorted({v.deployment for v in run.replicas})
    if not deployments:
        raise UsageError("--record: no replica was asked", hint="pass --endpoint DEPLOYMENT/INDEX=URL")
    files = {f"{CANARY_DIR}/{d}.yaml": reference_text(reference_from(run, plan, d)) for d in deployments}
    message = f"canary: reference answers of {', '.join(deployments)}\n\nRecorded by `fabric canary --record` from " + (
        ", ".join(v.name for v in run.replicas)
    )
    with gitrepo.write_lock(root, [CANARY_DIR]):
        if branch is not None:
            commit = gitrepo.commit_to_branch(root, branch, files, message)
        else:
            from llm_fabric.atomicio import write_atomic

            paths = [root / rel for rel in files]
            with gitrepo.rolled_back_on_error(root, paths):
                for rel, text in files.items():
                    write_atomic(root / rel, text)
                commit = gitrepo.commit_paths(root, paths, message)
    where = f"branch {branch}" if branch else "the checkout"
    if commit is None:
        err_console.print(f"reference of {', '.join(deployments)} unchanged: nothing to commit", markup=False)
    else:
        err_console.print(
            f"recorded {', '.join(files)} on {where} ({commit[:12]}): review and merge it like any change",
            markup=False,
        )


def _serve(
    root: Path | None,
    plan: Plan,
    once: Callable[[], CanaryRun],
    address: tuple[str, int],
    every: float,
    prometheus: str | None,
    metrics_file: Path | None,
    write_token: Path | None,
) -> None:
    from llm_fabric.live.prober import RotationEntry, prometheus_nodes_out, rotation, serve
    from llm_fabric.site.loader import load_site

    def cordoned(at: Path | None = root) -> dict[str, str]:
        if at is None:
            return {}
        return {
            n.name: "node cordoned in the site repo" for n in load_site(at).nodes.values() if n.status == "cordoned"
        }

    def cycle() -> tuple[CanaryRun, list[RotationEntry], list[str]]:
        run = once()
        notes = list(run.notes)
        # the site repo's cordons as they are now (a cordon commit lands before the re-plan is deployed)
        nodes_out = cordoned()
        if prometheus:
            found, error = prometheus_nodes_out(prometheus)
            nodes_out |= found
            if error:
                notes.append(error)
        return run, rotation(plan, run, nodes_out), notes

    def report(run: CanaryRun, entries: list[RotationEntry], notes: list[str]) -> None:
        out = [e for e in entries if not e.in_rotation]
        line = f"canary: {len(run.replicas)} replica(s) asked, {len(run.failing)} failing; out of rotation: " + (
            ", ".join(f"{e.deployment}/{e.index}" for e in out) or "none"
        )
        err_console.print(line, markup=False)
        if metrics_file is not None:
            from llm_fabric.atomicio import write_atomic
            from llm_fabric.live.canary import exposition
            from llm_fabric.live.prober import rotation_exposition

            write_atomic(metrics_file, exposition(run) + rotation_exposition(entries))

    from llm_fabric.live.canary import CanaryRun

    # every replica of the plan, in and unknown, until the first run: a drain notice may come before it
    replicas = rotation(plan, CanaryRun([], []), {})
    err_console.print(f"canary prober on http://{address[0]}:{address[1]} (every {every:g}s)", markup=False)
    if write_token is None:
        err_console.print("warning: no --write-token-file: drain notices (POST) are refused (401)", markup=False)
    serve(address, cycle, every, on_cycle=report, replicas=replicas, write_token=write_token)


commands = [canary_command]
