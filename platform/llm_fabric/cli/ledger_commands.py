"""`fabric report` (and `fabric report verify`), `fabric exporter`."""

from __future__ import annotations

import contextlib
import signal
import threading
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from llm_fabric import wording
from llm_fabric.cli.options import (
    json_option,
    out_option,
    plan_option,
    prometheus_option,
    site_repo_option,
    store_option,
)
from llm_fabric.cli.output import FabricConsole, console, print_json
from llm_fabric.errors import PolicyRefusal, UsageError

if TYPE_CHECKING:
    from llm_fabric.ledger.report.produce import Produced

# The ledger (DuckDB, jinja2), site loading and signing are imported inside the commands that use them:
# `fabric --help` and every ledger command import this module, and only `fabric report`/`exporter` need them.

err = FabricConsole(stderr=True, highlight=False, soft_wrap=True)
_files = click.Path(exists=True, dir_okay=False, path_type=Path)
_records = click.Path(exists=True, path_type=Path)  # a folder: its record files (the gateway meter's days)


_common = [
    site_repo_option(),
    prometheus_option("Prometheus holding the engines' vLLM metrics."),
    click.option(
        "--requests",
        "requests",
        multiple=True,
        type=_records,
        help="Request records (.jsonl/.parquet/.csv, or a folder of them), read into a temporary store instead "
        "of the ledger store; repeatable.",
    ),
    store_option,
    click.option(
        "--requests-format",
        type=click.Choice(["auto", "fabric", "litellm"]),
        default="auto",
        show_default=True,
        help="Record schema: the fabric's, or a LiteLLM spend-log export.",
    ),
    plan_option("Plan document (`fabric plan -o FILE`): replica -> node owner."),
]


def _with_common(func: Any) -> Any:
    for option in reversed(_common):
        func = option(func)
    return func


@click.group("report", invoke_without_command=True)
@_with_common
@click.option("--month", metavar="YYYY-MM", help="The month to report (UTC).")
@out_option("Folder for the report files.", required=False)
@click.option(
    "--sign-key",
    type=_files,
    help="Ed25519 private key (PEM, mode 0600) that signs the manifest; default: the federation key.",
)
@click.option(
    "--owner",
    metavar="GROUP",
    help="Only GROUP's statement: its nodes and what concerns them (a contributor's own report), signed alike.",
)
@json_option("Print every figure as JSON.")
@click.pass_context
def report_command(
    ctx: click.Context,
    site_repo: Path,
    prometheus_url: str | None,
    requests: tuple[Path, ...],
    store: Path | None,
    requests_format: str,
    plan_file: Path | None,
    month: str | None,
    out: Path | None,
    sign_key: Path | None,
    owner: str | None,
    as_json: bool,
) -> None:
    """Publish the month's usage report: Markdown, HTML with charts, JSON, CSVs, signed manifest.

    With --owner GROUP, only that contributor's statement (its nodes' hours, GPU-hours, its own use
    and what it lent to whom), signed like the federation's report.

    \b
    Examples:
      fabric report --site-repo ./site --month 2026-11 --prometheus http://127.0.0.1:9090 \\
          --requests requests.parquet --out report-2026-11
      fabric report verify report-2026-11 --site-repo ./site
      fabric report -C ./site --month 2026-11 --prometheus http://127.0.0.1:9090 \\
          --owner ceitec-structural --out statement-ceitec-2026-11

    Without --sign-key the manifest is signed with the federation's key (`fabric init` puts it
    beside the site repo; $FABRIC_ENROLLMENT_KEY overrides), when that key exists.
    """
    if ctx.invoked_subcommand is not None:
        return
    given = (("--month", month), ("--out", out))
    missing = [name for name, value in given if value is None]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}", hint="see `fabric report --help`")
    assert month is not None and out is not None
    from llm_fabric.ledger.report.produce import ReportRequest, produce_report

    request = ReportRequest(
        site_repo, month, out, requests, requests_format, prometheus_url, plan_file, store, sign_key, owner
    )
    with err.status("building the report", spinner="dots") as status:
        produced = produce_report(request, progress=status.update)
    if produced.view is not None:
        _print_statement(produced, out, as_json)
    else:
        _print_report(produced, month, out, as_json)


def _print_signer(produced: Produced) -> None:
    from llm_fabric.trust.signatures import key_id

    if produced.key is not None:
        console.print(f"manifest signed by key {key_id(produced.key.public_key())} ({produced.key_source})")
    else:
        console.print(f"[yellow]manifest not signed[/]: {produced.key_source}", markup=True)


def _print_report(produced: Produced, month: str, out: Path, as_json: bool) -> None:
    report = produced.report
    if as_json:
        print_json(report.as_json())
        return
    books = report.books
    console.print(f"report for {month} in [bold]{out}[/]: {', '.join(produced.files)}")
    _print_signer(produced)
    console.print(
        f"price ledger {books.price_ledger:,.2f} {books.currency}, operations {books.operations_ledger:,.2f}, "
        f"recovery {'n/a' if books.recovery is None else f'{books.recovery * 100:.1f} %'}, "
        f"institutional {books.institutional_with_cache:,.2f}"
    )
    for gap in report.data_gaps:
        console.print(f"[yellow]note:[/] {gap}", markup=True)
    for row in report.reconciliation:
        if row.warning:
            console.print(f"[red]drift:[/] {row.model} records vs engine {row.drift_pct} %", markup=True)


def _print_statement(produced: Produced, out: Path, as_json: bool) -> None:
    view = produced.view
    assert view is not None
    if as_json:
        print_json(view.as_json())
        return
    console.print(f"statement of {view.owner} for {view.month} in [bold]{out}[/]: {', '.join(produced.files)}")
    _print_signer(produced)
    for row in view.statement:
        hours = (
            f"{row.service_hours:,.2f} h in service, {row.down_hours:,.2f} h down"
            if row.service_hours is not None and row.down_hours is not None
            else f"{row.active_hours:,.2f} h active"
        )
        lent = (
            f"lent {row.lent.input_tokens + row.lent.output_tokens:,} tokens ({row.lent_value:,.2f} {view.currency}) "
            f"to {len(row.lent_to)} tenant(s)"
            if row.lent is not None and row.lent_value is not None
            else "lent: unknown"
        )
        console.print(
            f"{row.node}: {hours}, {row.cordoned_hours:,.2f} h cordoned of {row.month_hours:,.2f} h; "
            f"{'n/a' if row.serving_gpu_hours is None else f'{row.serving_gpu_hours:,.2f}'} GPU-h serving; {lent}",
            markup=False,
        )
    for gap in view.data_gaps:
        console.print(f"[yellow]note:[/] {gap}", markup=True)


@report_command.command("verify")
@click.argument("out", type=click.Path(exists=True, file_okay=False, path_type=Path))
@site_repo_option(
    optional_help="Trust the federation's public keys in DIR/keys/: the report must be signed by one of them."
)
@click.option("--public-key", type=_files, help="Trust this Ed25519 public key (PEM): the report must be signed by it.")
@click.option("--require-signature", is_flag=True, help="Refuse an unsigned manifest.")
@json_option()
def verify_command(
    out: Path, site_repo: Path | None, public_key: Path | None, require_signature: bool, as_json: bool
) -> None:
    """Check a report folder against its manifest and its signer: exit 0 if intact, 3 on any mismatch.

    With -C/--site-repo (or $FABRIC_SITE_REPO) or --public-key the signer must be a trusted key
    (authenticity). With neither, only integrity is checked: the signature is checked against the key
    inside the manifest, which whoever edits the files can replace too; the output says so.

    \b
    Examples:
      fabric report verify report-2026-11 -C ./site
      fabric report verify report-2026-11 --public-key federation.pub --json
    """
    from llm_fabric.ledger.report.manifest import verify
    from llm_fabric.trust.report_keys import trusted_keys

    trusted, trusted_from = trusted_keys(site_repo, public_key)
    result = verify(out, trusted)
    if require_signature and not result.signed:
        raise PolicyRefusal(
            f"report {out} is intact but not signed",
            hint="re-run `fabric report` with `--sign-key FILE`, the federation's private key",
        )
    integrity_only = (
        "integrity only: no trusted key given (--site-repo DIR or --public-key FILE), so the signer "
        "is not checked; anyone who edits the files can re-sign them with a key of their own"
    )
    if as_json:
        print_json(
            {
                "files": result.files,
                "signed": result.signed,
                "key_id": result.key_id,
                "ok": True,
                "authenticated": result.authenticated,
                "trusted_keys_from": trusted_from or None,
                "note": None if result.authenticated else integrity_only,
            }
        )
        return
    if result.authenticated:
        how = f"signed by key {result.key_id}, a trusted key (from {trusted_from})"
    elif result.signed:
        how = f"signed by key {result.key_id}, NOT checked against a trusted key"
    else:
        how = "NOT signed (hashes only)"
    console.print(
        f"[green]intact[/]: {out}: {wording.count(result.files, 'file')} match the manifest, {how}", markup=True
    )
    if not result.authenticated:
        console.print(f"[yellow]note[/]: {integrity_only}", markup=True)


@click.command("exporter")
@_with_common
@click.option("--port", type=click.IntRange(1, 65535), default=9464, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--refresh", type=float, default=60.0, show_default=True, help="Seconds between recomputing the books.")
@click.option("--once", is_flag=True, help="Print the metrics once (text format) and exit.")
def exporter_command(
    site_repo: Path,
    prometheus_url: str | None,
    requests: tuple[Path, ...],
    store: Path | None,
    requests_format: str,
    plan_file: Path | None,
    port: int,
    address: str,
    refresh: float,
    once: bool,
) -> None:
    """Serve pool and month-to-date ledger figures for Prometheus (prometheus-client).

    \b
    Examples:
      fabric exporter --site-repo ./site --port 9464 --prometheus http://127.0.0.1:9090
      fabric exporter --site-repo ./site --once | promtool check metrics
    """
    from prometheus_client import generate_latest, start_http_server

    from llm_fabric.ledger.report.exporter import build_registry, exporter_inputs
    from llm_fabric.trust.sites import load_trusted_site

    # trusted: the pool gauges count each owner's GPUs from the node manifests, as the report does
    site = load_trusted_site(site_repo)
    inputs = exporter_inputs(
        site,
        site_repo,
        records=requests,
        records_format=requests_format,
        prometheus_url=prometheus_url,
        plan=plan_file,
        store=store,
    )
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


@click.group("ledger")
def ledger_group() -> None:
    """The ledger store: request records ingested once, daily rollups that `fabric report` reads.

    \b
    Examples:
      fabric ledger ingest -C ./site gateway-2026-11-04.jsonl
      fabric ledger status -C ./site
      fabric ledger check -C ./site --month 2026-11
    """


@ledger_group.command("ingest")
@site_repo_option()
@store_option
@click.argument("files", nargs=-1, required=True, type=_records)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "fabric", "litellm"]),
    default="auto",
    show_default=True,
    help="Record schema: the fabric's (the gateway meter's), or a LiteLLM spend-log export.",
)
@click.option("--strict", is_flag=True, help="Ingest nothing if any record is bad (exit 2).")
@click.option(
    "--max-bad-pct",
    type=click.FloatRange(0, 100),
    help="Ingest nothing if more than this percentage of the records is bad (default: ledger.yaml's "
    "max_bad_pct, else 1).",
)
@json_option()
def ingest_command(
    site_repo: Path,
    store: Path | None,
    files: tuple[Path, ...],
    fmt: str,
    strict: bool,
    max_bad_pct: float | None,
    as_json: bool,
) -> None:
    """Add request records (JSON Lines, Parquet, LiteLLM spend logs) to the ledger store, once each.

    FILES are record files or folders of them (the gateway meter's folder: one file per UTC day).
    Records already in the store (same request id on the same day, or the same content without an
    id and occurrence) are skipped, so a folder ingested again adds only what is new; bad records are
    listed by file and line and left out (with --strict, nothing is added). A file with no good record,
    or more bad records than --max-bad-pct, adds nothing and exits 2. One transaction: an interrupted
    ingest leaves the store as it was.

    \b
    Examples:
      fabric ledger ingest -C ./site gateway-2026-11-04.jsonl
      fabric ledger ingest -C ./site ./gateway-records/
      fabric ledger ingest --store /srv/ledger/cerit.duckdb spend-logs.csv --format litellm --json
    """
    from llm_fabric.ledger.store.database import LedgerStore, site_max_bad_pct, site_store
    from llm_fabric.ledger.store.records import record_format

    path = site_store(site_repo, store)
    limit = Decimal(str(max_bad_pct)) if max_bad_pct is not None else site_max_bad_pct(site_repo)
    with (
        err.status("ingesting", spinner="dots") as status,
        LedgerStore(path) as ledger,
    ):
        result = ledger.ingest(
            list(files),
            record_format(fmt),
            strict=strict,
            max_bad_pct=limit,
            progress=lambda msg: status.update(msg),
        )
    if as_json:
        print_json({"store": str(path), **result.as_dict()})
        return
    console.print(
        f"{path}: {result.added:,} record(s) added, {result.duplicates:,} already there, {result.bad:,} bad "
        f"(of {result.records:,} read from {len(result.files)} file(s)); rollups updated for {len(result.days)} day(s)"
    )
    for bad in result.bad_listed:
        console.print(f"  bad record: {bad.as_problem()}", markup=False)
    if result.bad > len(result.bad_listed):
        console.print(f"  ... and {result.bad - len(result.bad_listed):,} more (`--json` lists the first ones too)")


@ledger_group.command("status")
@site_repo_option()
@store_option
@json_option()
def status_command(site_repo: Path, store: Path | None, as_json: bool) -> None:
    """What the ledger store holds: records, days, records per month, the last ingest.

    \b
    Example:
      fabric ledger status -C ./site --json
    """
    from llm_fabric.ledger.store.database import LedgerStore, site_store

    with LedgerStore(site_store(site_repo, store), read_only=True, memory_limit="1GB") as ledger:
        status = ledger.status()
    if as_json:
        print_json(status)
        return
    total: int = status["records"]  # type: ignore[assignment]
    console.print(
        f"{status['store']}: {wording.count(total, 'record')}, "
        f"{status['first_day'] or '-'} to {status['last_day'] or '-'}"
    )
    months: dict[str, int] = dict(status["months"])  # type: ignore[call-overload]
    for month, records in months.items():
        console.print(f"  {month}: {wording.count(records, 'record')}")
    last: dict[str, Any] | None = status["last_ingest"]  # type: ignore[assignment]
    if last:
        console.print(
            f"  last ingest #{last['ingest']} at {last['ingested_at']}: {', '.join(last['files'])}: "
            f"{last['records']:,} record(s) read, {last['added']:,} added, {last['duplicates']:,} already there, "
            f"{last['bad']:,} bad; rollups updated for {last['days']} day(s)",
            markup=False,
        )


@ledger_group.command("check")
@site_repo_option()
@store_option
@click.option("--month", metavar="YYYY-MM", required=True, help="The month to check (UTC).")
def check_command(site_repo: Path, store: Path | None, month: str) -> None:
    """Recompute a month from the raw records and compare it with its rollups: exit 0 if equal, 1 if not.

    \b
    Example:
      fabric ledger check -C ./site --month 2026-11
    """
    from llm_fabric.ledger.store.database import LedgerStore, site_store
    from llm_fabric.ledger.store.period import Month
    from llm_fabric.ledger.store.usage import checked_usage

    period = Month.parse(month)
    path = site_store(site_repo, store)
    with LedgerStore(path, read_only=True, memory_limit="1GB") as ledger:
        records = checked_usage(ledger.con, period, path)
    console.print(f"{path}: {month}'s rollups agree with its {wording.count(records.records_in_month, 'record')}")


@ledger_group.command("sample")
@site_repo_option()
@click.option("--month", metavar="YYYY-MM", required=True, help="The month the records fall in (UTC).")
@click.option("--count", type=click.IntRange(1, 100_000_000), default=20_000, show_default=True, help="Records.")
@click.option(
    "--seed", type=click.IntRange(0, 1_000_000), default=0, show_default=True, help="Another seed, other records."
)
@out_option("Records file (.jsonl, .parquet).", folder=False, short=True)
def sample_command(site_repo: Path, month: str, count: int, seed: int, out: Path) -> None:
    """Write a month of sample request records, as the gateway's meter writes them, for `fabric ledger ingest`.

    The records spread evenly over the month, over the site's deployments (prompt lengths follow each
    one's declared context profile) and tenants; same arguments, same file.

    \b
    Example:
      fabric ledger sample -C ./site --month 2026-11 --count 20000 -o requests-2026-11.jsonl
    """
    from llm_fabric.ledger.sample_records import sample_month
    from llm_fabric.ledger.store.period import Month
    from llm_fabric.site.loader import load_site

    period = Month.parse(month)
    # plain load_site: sample records for a local file, spread over deployments and tenants; no node is used
    sample_month(out, load_site(site_repo), period, count, seed=seed)
    console.print(
        f"wrote {out}: {wording.count(count, 'sample request record')} of {period} (seed {seed})", markup=False
    )


commands = [report_command, exporter_command, ledger_group]
