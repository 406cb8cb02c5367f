"""`fabric report` (and `fabric report verify`), `fabric exporter`."""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console

from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import UsageError
from llm_fabric.ledger.manifest import load_private_key, load_public_key, verify
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.publish import write_report
from llm_fabric.ledger.report import ReportInputs, build_report
from llm_fabric.site.loader import load_site

err = Console(stderr=True, highlight=False, soft_wrap=True)
_files = click.Path(exists=True, dir_okay=False, path_type=Path)


def _replica_owners(plan_path: Path | None) -> dict[tuple[str, str], str] | None:
    if plan_path is None:
        return None
    from llm_fabric.deploy.plan import Plan  # the deploy stack is needed only with --plan

    try:
        plan = Plan.model_validate_json(plan_path.read_text())
    except (OSError, ValidationError) as exc:
        raise UsageError(f"{plan_path}: not a plan written by `fabric plan --json`: {exc}") from exc
    return {(r.deployment, str(r.index)): r.owner for r in plan.replicas}


def _inputs(
    month: str, requests: tuple[Path, ...], fmt: str, prometheus: str | None, plan: Path | None
) -> ReportInputs:
    return ReportInputs(
        month=Month.parse(month),
        records=list(requests),
        records_format=fmt,  # type: ignore[arg-type]
        prometheus_url=prometheus,
        replica_owners=_replica_owners(plan),
    )


_common = [
    click.option("--site-repo", type=click.Path(file_okay=False, path_type=Path), help="The site repo (ledger.yaml)."),
    click.option("--prometheus", metavar="URL", help="Prometheus holding the engines' vLLM metrics."),
    click.option("--requests", "requests", multiple=True, type=_files,
                 help="Request records (.jsonl/.parquet/.csv); repeatable."),
    click.option("--requests-format", type=click.Choice(["auto", "fabric", "litellm"]), default="auto",
                 show_default=True, help="Record schema: the fabric's, or a LiteLLM spend-log export."),
    click.option("--plan", "plan", type=_files, help="Plan JSON (`fabric plan --json`): replica -> node owner."),
]


def _with_common(func: Any) -> Any:
    for option in reversed(_common):
        func = option(func)
    return func


@click.group("report", invoke_without_command=True)
@_with_common
@click.option("--month", metavar="YYYY-MM", help="The month to report (UTC).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Folder for the report files.")
@click.option("--sign-key", type=_files, help="Ed25519 private key (PEM) that signs the manifest.")
@click.option("--json", "as_json", is_flag=True, help="Print every figure as JSON.")
@click.pass_context
def report_command(ctx: click.Context, site_repo: Path | None, prometheus: str | None, requests: tuple[Path, ...],
                   requests_format: str, plan: Path | None, month: str | None, out: Path | None,
                   sign_key: Path | None, as_json: bool) -> None:
    """Publish the month's usage report: Markdown, HTML with charts, JSON, CSVs, signed manifest.

    \b
    Examples:
      fabric report --site-repo ./site --month 2026-11 --prometheus http://127.0.0.1:9090 \\
          --requests requests.parquet --out report-2026-11 --sign-key report.key
      fabric report verify report-2026-11 --public-key report.pub
    """
    if ctx.invoked_subcommand is not None:
        return
    given = (("--site-repo", site_repo), ("--month", month), ("--out", out))
    missing = [name for name, value in given if value is None]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}", hint="see `fabric report --help`")
    assert site_repo is not None and month is not None and out is not None
    site = load_site(site_repo)
    inputs = _inputs(month, requests, requests_format, prometheus, plan)
    key = load_private_key(sign_key) if sign_key else None
    with err.status("building the report", spinner="dots") as status:
        report = build_report(site, inputs, progress=lambda msg: status.update(f"report {month}: {msg}"))
        status.update("writing files")
        files = write_report(out, report, key)
    if as_json:
        print_json(report)
        return
    books = report["books"]
    console.print(f"report for {month} in [bold]{out}[/]: {', '.join(files)}")
    console.print(
        f"price ledger {books['price_ledger']:,.2f} {books['currency']}, operations {books['operations_ledger']:,.2f}, "
        f"recovery {books['recovery'] if books['recovery'] is not None else 'n/a'}, "
        f"institutional {books['institutional_with_cache']:,.2f}"
    )
    for gap in report["data_gaps"]:
        console.print(f"[yellow]note:[/] {gap}", markup=True)
    for row in report["reconciliation"]:
        if row["warning"]:
            console.print(f"[red]drift:[/] {row['model']} records vs engine {row['drift_pct']} %", markup=True)


@report_command.command("verify")
@click.argument("out", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--public-key", type=_files, help="Trusted Ed25519 public key (PEM) the report must be signed with.")
@click.option("--require-signature", is_flag=True, help="Refuse an unsigned manifest.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify_command(out: Path, public_key: Path | None, require_signature: bool, as_json: bool) -> None:
    """Check a report folder against its manifest: exit 0 if intact, 3 if any byte changed.

    \b
    Example:
      fabric report verify report-2026-11 --public-key report.pub
    """
    result = verify(out, load_public_key(public_key) if public_key else None)
    if require_signature and not result.signed:
        from llm_fabric.errors import PolicyRefusal

        raise PolicyRefusal(f"report {out} is intact but not signed", hint="re-run `fabric report` with --sign-key")
    if as_json:
        print_json({"files": result.files, "signed": result.signed, "key_id": result.key_id, "ok": True})
        return
    how = f"signed by key {result.key_id}" if result.signed else "NOT signed (hashes only)"
    console.print(f"[green]intact[/]: {out}: {result.files} files match the manifest, {how}", markup=True)


@click.command("exporter")
@_with_common
@click.option("--port", type=click.IntRange(1, 65535), default=9464, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--refresh", type=float, default=60.0, show_default=True, help="Seconds between recomputing the books.")
@click.option("--once", is_flag=True, help="Print the metrics once (text format) and exit.")
def exporter_command(site_repo: Path | None, prometheus: str | None, requests: tuple[Path, ...], requests_format: str,
                     plan: Path | None, port: int, address: str, refresh: float, once: bool) -> None:
    """Serve pool and month-to-date ledger figures for Prometheus (prometheus-client).

    \b
    Examples:
      fabric exporter --site-repo ./site --port 9464 --prometheus http://127.0.0.1:9090
      fabric exporter --site-repo ./site --once | promtool check metrics
    """
    from prometheus_client import generate_latest, start_http_server

    from llm_fabric.ledger.exporter import build_registry

    if site_repo is None:
        raise UsageError("missing --site-repo", hint="see `fabric exporter --help`")
    site = load_site(site_repo)
    with_books = bool(requests or prometheus)
    inputs = _inputs("2000-01", requests, requests_format, prometheus, plan) if with_books else None
    registry = build_registry(site, inputs, refresh)
    if once:
        click.echo(generate_latest(registry).decode(), nl=False)
        return
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        raise UsageError(f"cannot listen on {address}:{port}: {exc}", hint="choose another --port") from exc
    stop = threading.Event()

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    err.print(f"serving fabric metrics on http://{address}:{port}/metrics (Ctrl-C or SIGTERM stops)")
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    server.shutdown()
    thread.join(timeout=5)


commands = [report_command, exporter_command]
