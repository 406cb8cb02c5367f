"""The month's report as a typed document: what `build_report` returns and every reader takes.

`fabric report` writes it as report.json (and Markdown, HTML, CSVs), `fabric report --json` prints it,
the exporter serves its figures. Field order is the CSV column order; the JSON is written with sorted
keys. Money is in the ledger currency, rounded to cents only here, for display (the books keep Decimal).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field

from llm_fabric.basemodel import FabricModel
from llm_fabric.ledger.report.books import cents
from llm_fabric.ledger.store.usage import Tokens


def money(value: Decimal | None) -> float | None:
    """An amount as the document holds it: rounded to cents."""
    return float(cents(value)) if value is not None else None


def token_row(tokens: Tokens) -> dict[str, Any]:
    """A `TokenRow`'s fields from integer token counts."""
    return {
        "requests": tokens.requests,
        "failed_requests": tokens.failed,
        "input_tokens": tokens.input,
        "cached_input_tokens": tokens.cached_input,
        "output_tokens": tokens.output,
        "input_output_ratio": tokens.input_output_ratio,
    }


class _Row(FabricModel):
    # rows are built by the report, not read from a user's file: validation is the safety net, not the API
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenRow(_Row):
    requests: int
    failed_requests: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    input_output_ratio: float | None


class UsageRow(_Row):
    """Usage of one deployment (by model) or one tenant; `source` says whether records or engine counters."""

    name: str
    source: str
    requests: int
    failed_requests: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    input_output_ratio: float | None
    prompt_p50: int | None
    prompt_p95: int | None
    prompt_p99: int | None
    percentiles: str
    peak_output_tokens_per_s: float | None
    peak_total_tokens_per_s: float | None
    peak_concurrent_requests: int | None
    max_queue_depth: int | None
    cache_hit_rate: float | None
    mean_ttft_ms: float | None


class DailyRow(_Row):
    day: str
    model: str
    requests: int
    failed_requests: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    input_output_ratio: float | None


class PriceLineRow(_Row):
    model: str
    reference: float | None
    commercial_with_cache: float | None
    commercial_without_cache: float | None


class HardwareRow(_Row):
    node: str
    capex: float | None
    days_in_service: int
    monthly: float | None


class BooksSection(_Row):
    """The three ledgers (seed 000): price, operations, institutional (with and without cache pricing)."""

    currency: str
    price_ledger: float
    operations_ledger: float
    recovery: float | None
    subsidy: float
    institutional_with_cache: float
    institutional_without_cache: float
    savings: float
    unpriced_models: list[str]
    price_lines: list[PriceLineRow]
    hardware: list[HardwareRow]


class ContributorRow(_Row):
    owner: str
    contributed_gpus: int
    dedicated_gpus: int
    pooled_gpus: int
    lend_surplus: bool
    dedicated_deployments: list[str]
    dedicated_usage: TokenRow
    dedicated_value: float | None
    lent_to: dict[str, TokenRow]
    lent_value: float | None
    pool_usage: TokenRow
    served_on_hardware: TokenRow | None


class LentRow(TokenRow):
    """What one other tenant used of a node, and its value at the reference prices."""

    value: float | None


class NodeDeploymentRow(_Row):
    """One deployment's replicas on a node: GPU-hours up, and who used them (records, by up-time share)."""

    deployment: str
    dedicated_for_owner: bool
    replicas: list[str]
    up_hours: float
    gpu_hours: float | None
    share_of_deployment: float | None  # of the deployment's up-time, the part on this node
    owner_usage: TokenRow | None
    others_usage: TokenRow | None


class StatusChangeRow(_Row):
    at: str
    status: str
    commit: str | None


class NodeStatementRow(_Row):
    """The contributor's statement of one node for the month (docs/ledger.md, "The contributor's statement").

    Hours: service + down = active (the manifest's status; service: an engine on it was up), and
    active + cordoned + retired + not_enrolled = month_hours.
    """

    node: str
    site: str
    owner: str
    gpu_model: str
    gpus: int
    month_hours: float
    service_hours: float | None
    down_hours: float | None
    active_hours: float
    cordoned_hours: float
    retired_hours: float
    not_enrolled_hours: float
    status_changes: list[StatusChangeRow]
    gpu_hours: float
    serving_gpu_hours: float | None
    idle_gpu_hours: float | None
    deployments: list[NodeDeploymentRow]
    owner_usage: TokenRow | None
    owner_value: float | None
    lent: TokenRow | None
    lent_value: float | None
    lent_to: dict[str, LentRow]
    notes: list[str]


class ReconciliationRow(_Row):
    model: str
    records_input_tokens: int
    engine_input_tokens: int
    records_output_tokens: int
    engine_output_tokens: int
    drift_pct: float | None
    warning: bool


class MergedRow(_Row):
    """Records of `file` not counted: their natural key repeats (`reason`), so they are one request."""

    file: str
    reason: str
    records: int


class RecordSource(_Row):
    files: list[str]
    store: str | None
    bad_records: int
    merged_duplicates: list[MergedRow]
    records_in_month: int
    records_outside_month: int


class PrometheusSource(_Row):
    url: str
    covered_until: str


class Sources(_Row):
    records: RecordSource | None
    prometheus: PrometheusSource | None


class UnknownRow(TokenRow):
    """A tenant or model the records name and the site repo does not know (report.unknown_in_records)."""

    name: str


class UnknownInRecords(_Row):
    models: list[UnknownRow] = Field(default_factory=list)
    tenants: list[UnknownRow] = Field(default_factory=list)


class MonthReport(_Row):
    federation: str
    month: str
    generated_at: str
    currency: str
    commercial_reference: str
    sources: Sources
    totals: TokenRow
    usage_by_model: list[UsageRow]
    usage_by_tenant: list[UsageRow]
    daily: list[DailyRow]
    books: BooksSection
    contributors: list[ContributorRow]
    statement: list[NodeStatementRow] = Field(default_factory=list)
    reconciliation: list[ReconciliationRow]
    drift_warning_pct: float
    unknown_in_records: UnknownInRecords = Field(default_factory=UnknownInRecords)
    data_gaps: list[str]
    # deployment -> the month's canary pass rate (ledger.store.canary_rate), with --prometheus only
    canary_pass_rate: dict[str, float] = Field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class OwnerReport(_Row):
    """A contributor's own report (`fabric report --owner GROUP`, llm_fabric.ledger.report.owner_view)."""

    federation: str
    month: str
    generated_at: str
    currency: str
    owner: str
    owner_name: str
    dedicated_gpus: int
    contributor: ContributorRow | None
    statement: list[NodeStatementRow]
    lent_to: dict[str, LentRow]  # over all its nodes
    lent_value: float | None
    plan_shortfalls: list[str]
    data_gaps: list[str]

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
