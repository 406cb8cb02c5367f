"""`fabric gateway config` and `fabric gateway run`: the tenant gateway (LiteLLM proxy with the fabric's hooks)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_fabric.cli.options import site_repo_option
from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import UsageError

if TYPE_CHECKING:
    from llm_fabric.gateway.config import GatewayFiles

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


def _build(
    site_repo: Path,
    plan_file: Path | None,
    site_name: str | None,
    *,
    endpoints: dict[tuple[str, str | None], str] | None = None,
    externals: dict[str, str] | None = None,
    local: bool = False,
) -> GatewayFiles:
    from llm_fabric.gateway.config import build_gateway, gateway_site
    from llm_fabric.plan.document import load_plan
    from llm_fabric.trust.sites import load_trusted_site

    site = load_trusted_site(site_repo)
    if plan_file is not None:
        plan = load_plan(plan_file)
    else:
        from llm_fabric.plan.planning import plan_site

        plan = plan_site(site)
    unknown = sorted({d for d, _ in (endpoints or {})} - set(plan.deployments))
    if unknown:
        raise UsageError(
            f"--endpoint names deployment(s) the plan does not have: {', '.join(unknown)}",
            hint=f"planned: {', '.join(sorted(plan.deployments))}",
        )
    return build_gateway(
        site,
        plan.require_complete(),
        site_id=gateway_site(site, site_name),
        endpoints=endpoints,
        externals=externals,
        local=local,
    )


_plan_option = click.option(
    "--plan",
    "plan_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Plan from `fabric plan -o` (default: plan the site repo now).",
)


@click.group("gateway")
def gateway_group() -> None:
    """The tenant gateway: LiteLLM's proxy generated from the site repo and the plan.

    \b
    Examples:
      fabric gateway config -C ./site --plan plan.json --out ./gateway
      fabric gateway run -C ./site --plan plan.json --endpoint qwen3-5=http://127.0.0.1:8000/v1 --records ./records
    """


@gateway_group.command("config")
@site_repo_option()
@_plan_option
@click.option(
    "--site", "site_name", metavar="NAME", help="Site whose cluster runs the gateway (default: gateway.site)."
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for litellm-config.yaml and fabric-gateway.json.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the files written and the notes as JSON.")
def config_command(site_repo: Path, plan_file: Path | None, site_name: str | None, out: Path, as_json: bool) -> None:
    """Write LiteLLM's config and the hooks' settings for the gateway.

    A model group per deployment and data class holds the replicas that class may reach; each
    tenant's key hashes, limits and allowed groups go in fabric-gateway.json. No key is written.

    \b
    Example:
      fabric gateway config -C ./site --plan plan.json --out ./gateway
    """
    from llm_fabric.gateway.run import write_gateway_files

    files = _build(site_repo, plan_file, site_name)
    written = write_gateway_files(files, out)
    if as_json:
        print_json({"files": [str(p) for p in written], "groups": sorted(files.settings.groups), "notes": files.notes})
        return
    for path in written:
        console.print(f"wrote {path}", markup=False)
    console.print(f"{len(files.settings.groups)} model groups, {len(files.settings.tenants)} tenants", markup=False)
    for note in files.notes:
        console.print(f"  note: {note}", markup=False)


@gateway_group.command("run")
@site_repo_option()
@_plan_option
@click.option("--site", "site_name", metavar="NAME", help="Site the gateway stands in for (default: gateway.site).")
@click.option("--port", type=click.IntRange(1, 65535), help="Port on 127.0.0.1 (default: a free one).")
@click.option(
    "--endpoint",
    "endpoints",
    multiple=True,
    metavar="DEPLOYMENT[@SITE]=URL",
    required=True,
    help="A local engine in place of a deployment's replicas (at SITE); repeatable.",
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
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Config and log (default: temp).")
@click.option("--timeout", type=float, default=120, show_default=True, help="Seconds to wait for the proxy.")
def run_command(
    site_repo: Path,
    plan_file: Path | None,
    site_name: str | None,
    port: int | None,
    endpoints: tuple[str, ...],
    externals: tuple[str, ...],
    records: Path,
    run_dir: Path | None,
    timeout: float,
) -> None:
    """Run the real LiteLLM proxy on 127.0.0.1 with the generated config, the hooks and local engines.

    Serves until Ctrl-C. Only the deployments given with --endpoint are routed.

    \b
    Example:
      fabric gateway run -C ./site --plan plan.json --endpoint qwen3-5=http://127.0.0.1:8000/v1 \\
        --records ./records --port 4000
    """
    from llm_fabric.cli.local_engine_commands import serve_until_stopped
    from llm_fabric.gateway.run import start_gateway, write_gateway_files

    files = _build(
        site_repo,
        plan_file,
        site_name,
        endpoints=_endpoints(endpoints),
        externals=dict(_parse_pairs(externals, "--external")),
        local=True,
    )
    folder = run_dir or Path(tempfile.mkdtemp(prefix="fabric-gateway-"))
    write_gateway_files(files, folder)
    gateway = start_gateway(folder, records.resolve(), port=port)
    console.print(
        f"LiteLLM pid {gateway.pid} on {gateway.base_url}; config {folder}; log {gateway.log_path}", markup=False
    )
    for note in files.notes:
        console.print(f"  note: {note}", markup=False)
    serve_until_stopped(gateway, timeout)


commands = [gateway_group]
