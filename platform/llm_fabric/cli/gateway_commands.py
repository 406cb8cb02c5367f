"""`fabric gateway config` and `fabric gateway run`: the tenant gateway (LiteLLM proxy with the fabric's hooks)."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from llm_fabric import wording
from llm_fabric.cli.options import json_option, out_option, plan_option, site_option, site_repo_option
from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import UsageError

if TYPE_CHECKING:
    from llm_fabric.engine.process import LocalEngine

# the planner, the site loader and the gateway are imported inside the commands: `fabric --help` imports this
# module, and each command should pay only for its own.


def _parse_pairs(values: tuple[str, ...], what: str) -> list[tuple[str, str]]:
    out = []
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise UsageError(f"{what} `{value}` is not NAME=URL", hint=f"e.g. {what} qwen3-5=http://127.0.0.1:8000/v1")
        out.append((name, url))
    return out


def _endpoints(values: tuple[str, ...]) -> dict[tuple[str, str | None], str]:
    out: dict[tuple[str, str | None], str] = {}
    for name, url in _parse_pairs(values, "--endpoint"):
        deployment, _, at = name.partition("@")
        out[(deployment, at or None)] = url
    return out


def _replica_endpoints(values: tuple[str, ...]) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for name, url in _parse_pairs(values, "--replica"):
        deployment, _, index = name.rpartition("/")
        if not deployment or not index.isdigit():
            raise UsageError(
                f"--replica `{name}` is not DEPLOYMENT/INDEX", hint="e.g. --replica qwen3-5/0=http://127.0.0.1:8000/v1"
            )
        out[(deployment, int(index))] = url
    return out


@click.group("gateway")
def gateway_group() -> None:
    """The tenant gateway: LiteLLM's proxy generated from the site repo and the plan.

    \b
    Examples:
      fabric gateway config -C ./site --plan plan.json --site brno --out ./gateway
      fabric gateway run -C ./site --plan plan.json --site brno --endpoint qwen3-5=http://127.0.0.1:8000/v1 \
        --peer vienna=http://127.0.0.1:4001/v1 --records ./records
    """


@gateway_group.command("config")
@site_repo_option()
@plan_option()
@site_option("Site whose gateway to build (every site runs its own; default: the only one).")
@out_option("Folder for litellm-config.yaml and fabric-gateway.json.")
@json_option("Print the files written and the notes as JSON.")
def config_command(site_repo: Path, plan_file: Path | None, site_name: str | None, out: Path, as_json: bool) -> None:
    """Write LiteLLM's config and the hooks' settings for the gateway.

    A model group per deployment and data class holds the replicas that class may reach; each
    tenant's key hashes, limits and allowed groups go in fabric-gateway.json. No key is written.

    \b
    Example:
      fabric gateway config -C ./site --plan plan.json --site brno --out ./gateway
    """
    from llm_fabric.gateway.config import gateway_for
    from llm_fabric.gateway.run import write_gateway_files

    files = gateway_for(site_repo, plan_file, site_name)
    written = write_gateway_files(files, out)
    if as_json:
        print_json({"files": [str(p) for p in written], "groups": sorted(files.settings.groups), "notes": files.notes})
        return
    for path in written:
        console.print(f"wrote {path}", markup=False)
    console.print(
        f"{wording.count(len(files.settings.groups), 'model group')}, "
        f"{wording.count(len(files.settings.tenants), 'tenant')}",
        markup=False,
    )
    for note in files.notes:
        console.print(f"  note: {note}", markup=False)


@gateway_group.command("run")
@site_repo_option()
@plan_option()
@site_option("Site whose gateway this stands in for (default: the only one).")
@click.option("--port", type=click.IntRange(1, 65535), help="Port on 127.0.0.1 (default: a free one).")
@click.option(
    "--endpoint",
    "endpoints",
    multiple=True,
    metavar="DEPLOYMENT[@SITE]=URL",
    help="A local engine in place of a deployment's replicas at this gateway's site; repeatable.",
)
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="SITE=URL",
    help="Another site's gateway (its /v1 URL) in place of gateway.sites.SITE.url; repeatable. Relays carry "
    "$FABRIC_GATEWAY_PEER_KEY: give every local gateway the same.",
)
@click.option(
    "--replica",
    "replicas",
    multiple=True,
    metavar="DEPLOYMENT/INDEX=URL",
    help="One replica's own engine, routed as an entry of its own (the canary's rotation can take it out).",
)
@click.option(
    "--external",
    "externals",
    multiple=True,
    metavar="NAME=URL",
    help="A local stand-in for the external provider NAME of fabric.yaml; repeatable.",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder of the meter's request records, one JSON Lines file per UTC day "
    "(read by `fabric ledger ingest` and `fabric report --requests`).",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the config, the tenant key hashes and the log in this folder (default: a temporary one, removed "
    "when the gateway stops).",
)
@click.option("--timeout", type=float, default=120, show_default=True, help="Seconds to wait for the proxy.")
def run_command(
    site_repo: Path,
    plan_file: Path | None,
    site_name: str | None,
    port: int | None,
    endpoints: tuple[str, ...],
    peers: tuple[str, ...],
    replicas: tuple[str, ...],
    externals: tuple[str, ...],
    records: Path,
    run_dir: Path | None,
    timeout: float,
) -> None:
    """Run the real LiteLLM proxy on 127.0.0.1 with the generated config, the hooks and local engines.

    Serves until Ctrl-C, SIGTERM, SIGHUP or a closed stdout, each of which stops the proxy; the proxy
    also dies with fabric (a parent-death signal). A --port already taken is refused (exit 2); a proxy
    that exits by itself ends fabric with an error naming its exit code. Only the deployments given
    with --endpoint (this site's) and --peer (other sites' gateways) are routed.

    \b
    Example:
      fabric gateway run -C ./site --plan plan.json --site brno --endpoint qwen3-5=http://127.0.0.1:8000/v1 \\
        --records ./records --port 4000
    """
    from llm_fabric.gateway.config import gateway_for
    from llm_fabric.gateway.endpoints import LocalRun
    from llm_fabric.gateway.run import start_gateway, write_gateway_files

    if not endpoints and not replicas:
        raise UsageError("no engine to route to: pass --endpoint DEPLOYMENT=URL or --replica DEPLOYMENT/INDEX=URL")
    reach = LocalRun(
        engines=_endpoints(endpoints),
        peers=dict(_parse_pairs(peers, "--peer")),
        externals=dict(_parse_pairs(externals, "--external")),
        replicas=_replica_endpoints(replicas),
    )
    files = gateway_for(site_repo, plan_file, site_name, reach)
    folder = (run_dir or Path(tempfile.mkdtemp(prefix="fabric-gateway-"))).resolve()
    try:
        write_gateway_files(files, folder)
        with _stop_signals():
            gateway = start_gateway(folder, records, port=port)
            _serve(gateway, timeout, [f"  note: {note}" for note in files.notes])
    finally:
        if run_dir is None:  # its tenant key hashes and log go with it, a failed start's too: --run-dir keeps them
            shutil.rmtree(folder, ignore_errors=True)
    if run_dir is not None and not _stdout_closed():
        console.print(f"kept: config, tenant key hashes and log in {folder}", markup=False)


class _Stop(BaseException):
    """SIGTERM or SIGHUP: stop the proxy and end (a BaseException, so no handler on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signum)


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (the terminal closed) stop the proxy as Ctrl-C does, from the start on."""
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except _Stop:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stdout_closed() -> bool:
    """Whether the reader of stdout went away (`| head -1` exited, or the terminal hung up)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # POLLERR and POLLHUP are reported whatever is asked
        return any(events & (select.POLLERR | select.POLLHUP) for _fd, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _quiet_stdout() -> None:
    """No more output (its reader is gone): the interpreter's last flush must not fail either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _serve(gateway: LocalEngine, timeout: float, notes: list[str]) -> None:
    """Serve until the proxy exits (an error naming its exit code), Ctrl-C, SIGTERM/SIGHUP or a closed stdout;
    the proxy is stopped in every case (and dies with the fabric on its own: a parent-death signal)."""
    from llm_fabric.gateway.run import exit_words, exited_error, wait_owned

    announce = True  # say "stopped": not where the output's reader is gone
    try:
        console.print(
            f"LiteLLM pid {gateway.pid} on {gateway.base_url}; config {gateway.run_dir}; log {gateway.log_path}",
            markup=False,
        )
        for note in notes:
            console.print(note, markup=False)
        seconds = wait_owned(gateway, timeout)
        console.print(f"[green]healthy[/] after {seconds:.0f} s: {gateway.base_url} (pid {gateway.pid})")
        while gateway.alive() and not _stdout_closed():
            time.sleep(0.5)
        if not gateway.alive():
            raise exited_error(gateway, gateway.process.poll() if gateway.process else None)
        announce = False
    except BrokenPipeError:
        announce = False
    except _Stop as stop:
        announce = stop.signum != signal.SIGHUP
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # a second signal must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        if not announce:
            _quiet_stdout()
        if gateway.alive():
            status = gateway.stop()
            if announce:
                console.print(f"stopped {gateway.label} (pid {gateway.pid}, {exit_words(status)})", markup=False)


@gateway_group.command("relay-key")
@click.argument("site_id", metavar="SITE")
@site_repo_option()
@click.option(
    "--private-key",
    "private_key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the private key (mode 0600, outside the repo). Default: ./relay-SITE.pem.",
)
@click.option("--replace", is_flag=True, help="Make a new key pair where one exists (the review lists the change).")
def relay_key_command(site_id: str, site_repo: Path, private_key: Path | None, replace: bool) -> None:
    """Make the key pair a site's gateway signs its relays with.

    The private key goes to a file outside the repo, for that site's Secret `fabric-gateway-relay-key`;
    the public key to keys/gateway-relay/SITE.pub, which every site's gateway believes relays by.

    \b
    Example:
      fabric gateway relay-key brno -C ./site --private-key ~/relay-brno.pem
    """
    from llm_fabric.gateway.relay_keys import create_relay_key
    from llm_fabric.site.loader import load_site

    site = load_site(site_repo)
    private_out = private_key if private_key is not None else Path(f"relay-{site_id}.pem")
    public_path = create_relay_key(site, site_id, private_out, replace=replace)
    console.print(f"wrote {private_out} (private, mode 0600: keep it out of the repo)", markup=False)
    console.print(f"wrote {public_path}", markup=False)
    console.print(
        f"next: kubectl --context {site.config.sites[site_id].cluster.name} -n "
        f"{site.config.sites[site_id].cluster.namespace} create secret generic fabric-gateway-relay-key "
        f"--from-file=relay.pem={private_out}",
        markup=False,
    )


commands = [gateway_group]
