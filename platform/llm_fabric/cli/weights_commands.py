"""`fabric weights`: the checkpoints a plan needs pinned in the site repo's `weights.lock`, and a model cache
checked against it (the pod's own check)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_fabric import wording
from llm_fabric.cli.options import plan_option, site_option, site_repo_option
from llm_fabric.cli.output import console, err_console

if TYPE_CHECKING:
    from llm_fabric.site.loader import SiteRepo
    from llm_fabric.weights.pin import PinResult

# the core is imported inside the commands: `fabric --help` imports this module


def _default_cache() -> Path:
    from llm_fabric.kube.options import StackOptions  # the path the serving pods mount (hostPath)

    return Path(str(StackOptions.model_fields["model_cache_path"].default))


cache_option = click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    help="The node's model cache folder (the serving pods' hostPath; default /var/lib/llm-fabric/models). "
    "Its Hugging Face cache is CACHE/hf, the pods' HF_HOME.",
)


@click.group("weights")
def weights_group() -> None:
    """The weights every replica loads, pinned in weights.lock.

    \b
    Examples:
      HF_ENDPOINT=https://hf-mirror.example.org fabric weights stage -C ./site --plan plan.json
      fabric weights lock -C ./site --plan plan.json --cache /var/lib/llm-fabric/models
      fabric weights verify -C ./site --cache /var/lib/llm-fabric/models
    """


weights_plan_option = plan_option("Plan from `fabric plan -o`; default: the site repo planned afresh.")
weights_site_option = site_option("Only the checkpoints of replicas at this site.")


def _needed(site_repo: Path, plan_file: Path | None, site_id: str | None) -> tuple[SiteRepo, dict[str, list[str]]]:
    from llm_fabric.plan.document import load_plan
    from llm_fabric.trust.sites import load_trusted_site
    from llm_fabric.weights.needs import check_site, needed_checkpoints

    site = load_trusted_site(site_repo)
    check_site(site, site_id)
    if plan_file is not None:
        plan = load_plan(plan_file)
    else:
        from llm_fabric.plan.planning import plan_site  # the solver only when planning here

        plan = plan_site(site)
    return site, needed_checkpoints(site, plan, site_id)


def _print_pins(result: PinResult, needed: dict[str, list[str]]) -> None:
    for p in result.checkpoints:
        console.print(
            f"{p.state:9} {p.checkpoint}@{p.revision[:12]}: {wording.count(p.files, 'file')}, {p.size} bytes "
            f"(for {', '.join(needed[p.checkpoint])})",
            markup=False,
        )
    what = "written" if result.written else "unchanged"
    console.print(
        f"{result.lock_path}: {what} ({wording.count(len(result.checkpoints), 'checkpoint')} needed)", markup=False
    )


@weights_group.command("stage")
@site_repo_option()
@weights_plan_option
@cache_option
@weights_site_option
def stage_command(site_repo: Path, plan_file: Path | None, cache: Path | None, site_name: str | None) -> None:
    """Download every checkpoint the plan needs into the model cache and pin it in weights.lock.

    From the Hugging Face Hub, or the mirror HF_ENDPOINT names (HF_TOKEN for private or gated repos).
    A pinned checkpoint is fetched at the lock's revision, a new one at the commit `main` names now; one
    whose files already match the lock is not fetched at all. Then as `fabric weights lock`.

    \b
    Examples:
      HF_ENDPOINT=https://hf-mirror.example.org fabric weights stage -C ./site --plan plan.json
      fabric weights stage -C ./site --plan plan.json --site vienna --cache /var/lib/llm-fabric/models
    """
    from llm_fabric.weights.stage import hub_endpoint, stage_checkpoints

    endpoint, token = hub_endpoint(os.environ.get("HF_ENDPOINT")), os.environ.get("HF_TOKEN") or None
    site, needed = _needed(site_repo, plan_file, site_name)
    hf_home = (cache or _default_cache()) / "hf"
    staged, result = stage_checkpoints(site, hf_home, list(needed), endpoint=endpoint, token=token)
    for s in staged:
        console.print(f"{s.action:10} {s.checkpoint}@{s.revision[:12]}", markup=False)
    _print_pins(result, needed)


@weights_group.command("lock")
@site_repo_option()
@weights_plan_option
@cache_option
@weights_site_option
def lock_command(site_repo: Path, plan_file: Path | None, cache: Path | None, site_name: str | None) -> None:
    """Pin every checkpoint the plan needs, as the model cache holds it, in weights.lock (no download).

    A checkpoint the lock already pins keeps its revision; a new one takes the revision the cache's
    refs/main names. Every file's size and sha256 is recorded; the lock is rewritten only when it changes.

    \b
    Examples:
      fabric weights lock -C ./site --plan plan.json --cache /var/lib/llm-fabric/models
    """
    from llm_fabric.weights.pin import pin_checkpoints

    site, needed = _needed(site_repo, plan_file, site_name)
    result = pin_checkpoints(site, (cache or _default_cache()) / "hf", list(needed))
    _print_pins(result, needed)


@weights_group.command("verify")
@site_repo_option()
@cache_option
@click.option("--checkpoint", "checkpoints", multiple=True, help="Only this checkpoint (repeat); default: every one.")
def verify_command(site_repo: Path, cache: Path | None, checkpoints: tuple[str, ...]) -> None:
    """Check the model cache against weights.lock with the pod's own check (exit 2 naming each mismatch).

    \b
    Examples:
      fabric weights verify -C ./site --cache /var/lib/llm-fabric/models
    """
    from llm_fabric.site.loader import load_site
    from llm_fabric.weights.verify import verify_cache

    hf_home = (cache or _default_cache()) / "hf"
    for v in verify_cache(load_site(site_repo), hf_home, list(checkpoints)):
        console.print(
            f"ok {v.checkpoint}@{v.revision[:12]}: {wording.count(v.files, 'file')}, {v.size} bytes", markup=False
        )


commands = [weights_group]


@weights_group.command("mirror")
@click.option(
    "--serve",
    "folder",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A folder of checkpoints, each ORG/NAME/ with its files (as `hf download --local-dir` leaves them).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=0, type=click.IntRange(0, 65535), help="The port (default: a free one, printed).")
@click.option(
    "--detach", is_flag=True, help="Run in the background: print its URL once it listens (stdout), and return."
)
@click.option(
    "--idle-stop",
    default=0.0,
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Stop after this long without a request (0: never).",
)
def mirror_command(folder: Path, host: str, port: int, detach: bool, idle_stop: float) -> None:
    """Serve a folder of checkpoints as a Hugging Face Hub mirror, for HF_ENDPOINT.

    Each checkpoint is served at one fixed commit, with the endpoints huggingface_hub downloads through:
    what `fabric weights stage` reads on a machine without internet access, and a way to try it. In the
    foreground it serves until Ctrl-C; with --detach it prints only its URL on stdout (what it says about
    itself goes to stderr), so `export HF_ENDPOINT=$(fabric weights mirror --serve DIR --detach)` works.

    \b
    Examples:
      fabric weights mirror --serve /srv/checkpoints --port 8731
      export HF_ENDPOINT=$(fabric weights mirror --serve ./checkpoints --detach --idle-stop 300)
    """
    from llm_fabric.weights.mirror import checkpoint_folders, hf_mirror, serve, start_detached

    repos = checkpoint_folders(folder)
    listed = f"{wording.count(len(repos), 'checkpoint')} from {folder} ({', '.join(repos)})"
    if detach:
        url, pid = start_detached(folder, host, port, idle_stop)
        stops = f"after {idle_stop:g} s without a request or " if idle_stop else ""
        err_console.print(f"mirror of {listed} at {url} (HF_ENDPOINT)", markup=False)
        err_console.print(f"running in the background as pid {pid}; it stops {stops}with `kill {pid}`", markup=False)
        click.echo(url)
        return
    with hf_mirror(repos, host, port) as mirror:
        console.print(f"mirror of {listed} at {mirror.url} (HF_ENDPOINT); Ctrl-C stops it", markup=False)
        serve(mirror, idle_stop)
