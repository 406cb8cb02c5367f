"""`fabric report`: the month's inputs read, the report built, its files written and signed.

The command asks with a `ReportRequest` and prints what `produce_report` hands back: the federation's
report, or with `owner` one contributor's statement, the files written and the key that signed them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.ledger.report.build import build_report, report_inputs
from llm_fabric.ledger.report.month_report import MonthReport, OwnerReport
from llm_fabric.ledger.report.owner_view import check_owner, owner_view
from llm_fabric.ledger.report.publish import write_owner_report, write_report
from llm_fabric.ledger.store.database import site_store
from llm_fabric.plan.document import load_plan
from llm_fabric.trust.report_keys import signing_key
from llm_fabric.trust.sites import load_trusted_site


@dataclass(frozen=True)
class ReportRequest:
    """What `fabric report` was asked: the month, where its records come from, where the files go."""

    site_repo: Path
    month: str
    out: Path
    records: tuple[Path, ...]
    records_format: str
    prometheus_url: str | None
    plan_file: Path | None
    store: Path | None
    sign_key: Path | None
    owner: str | None


@dataclass(frozen=True)
class Produced:
    """The report (and with an owner, its statement: `view`), the files written, the key that signed them."""

    report: MonthReport
    view: OwnerReport | None
    files: list[str]
    key: Ed25519PrivateKey | None
    key_source: str


def produce_report(request: ReportRequest, progress: Callable[[str], None]) -> Produced:
    """Build `request`'s report and write it; `progress` hears each step."""
    # trusted: the signed report credits each owner with the GPUs its node manifests contribute
    site = load_trusted_site(request.site_repo)
    if request.owner is not None:
        check_owner(site, request.owner)  # before the month is read: a typo costs nothing
    inputs = report_inputs(
        month=request.month,
        records=request.records,
        records_format=request.records_format,
        prometheus_url=request.prometheus_url,
        plan=request.plan_file,
        store=None if request.records else site_store(request.site_repo, request.store),
    )
    key, key_source = signing_key(request.site_repo, request.sign_key)
    report = build_report(site, inputs, progress=lambda msg: progress(f"report {request.month}: {msg}"))
    progress("writing files")
    if request.owner is None:
        return Produced(report, None, write_report(request.out, report, key), key, key_source)
    shortfalls = load_plan(request.plan_file).shortfalls if request.plan_file is not None else []
    view = owner_view(report, site, request.owner, shortfalls)
    return Produced(report, view, write_owner_report(request.out, view, key), key, key_source)
