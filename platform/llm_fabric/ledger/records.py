"""Request records: the per-request log that gives exact percentiles and per-tenant attribution.

Schema (JSON Lines, one object per line, or Parquet with these column names; docs/ledger.md):

| column | type | required | meaning |
|---|---|---|---|
| ts | RFC 3339 string (Parquet: timestamp) | yes | when the request arrived; naive times are UTC |
| model | string | yes | the served model name: the deployment name |
| tenant | string | yes | the tenant (tenants/NAME.yaml) that sent it |
| prompt_tokens | integer | yes | input tokens, cached ones included |
| completion_tokens | integer | yes | output tokens |
| cached_prompt_tokens | integer | no | input tokens served from the prefix cache |
| ttft_ms | number | no | time to first token in milliseconds |
| status | string | yes | `ok`/`success`/2xx is a success; anything else a failure |
| request_id | string | no | natural key: a request exported twice counts once |

A gateway's spend log is read through an adapter (`litellm`: LiteLLM's `LiteLLM_SpendLogs` table
exported as CSV or JSON Lines); `--requests-format auto` picks it when the file has `startTime`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from llm_fabric.errors import UsageError

RecordFormat = Literal["auto", "fabric", "litellm"]

REQUIRED = ("ts", "model", "tenant", "prompt_tokens", "completion_tokens", "status")
OPTIONAL = ("cached_prompt_tokens", "ttft_ms", "request_id")
_TYPES = {
    "ts": "VARCHAR",
    "model": "VARCHAR",
    "tenant": "VARCHAR",
    "prompt_tokens": "BIGINT",
    "completion_tokens": "BIGINT",
    "cached_prompt_tokens": "BIGINT",
    "ttft_ms": "DOUBLE",
    "status": "VARCHAR",
    "request_id": "VARCHAR",
}
SUCCESS_SQL = "(lower(status) IN ('ok', 'success', 'succeeded') OR status LIKE '2__')"


@dataclass(frozen=True)
class RecordSource:
    files: list[Path]
    formats: list[str]
    has_cached: bool
    has_ttft: bool
    deduplicated: bool


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _reader(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".parquet"):
        return f"read_parquet({_quote(str(path))})"
    if name.endswith((".csv", ".csv.gz")):
        return f"read_csv({_quote(str(path))}, header=true, all_varchar=true)"
    if name.endswith((".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")):
        return f"read_json({_quote(str(path))}, format='newline_delimited', sample_size=-1)"
    raise UsageError(f"{path}: unknown request-record file type", hint="use .jsonl, .ndjson, .parquet or .csv")


def _columns(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    if not path.is_file():
        raise UsageError(f"request records {path} not found", hint="give existing files to --requests")
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {_reader(path)}").fetchall()
    except duckdb.Error as exc:
        raise UsageError(f"{path}: cannot read request records: {exc}") from exc
    return {str(r[0]): str(r[1]) for r in rows}


def _fabric_select(path: Path, columns: dict[str, str]) -> str:
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise UsageError(
            f"{path}: request records lack column(s) {', '.join(missing)}",
            hint="see the record schema in docs/ledger.md, or pass --requests-format litellm for a LiteLLM export",
        )
    # a naive Parquet TIMESTAMP is UTC already: the time-zone cast would cost more than the whole scan
    ts = "ts" if columns["ts"] == "TIMESTAMP" else "CAST(CAST(ts AS TIMESTAMPTZ) AS TIMESTAMP)"
    parts = [f"{ts} AS ts"]
    for col in REQUIRED[1:] + OPTIONAL:
        parts.append(f"CAST({col} AS {_TYPES[col]}) AS {col}" if col in columns else f"NULL::{_TYPES[col]} AS {col}")
    return f"SELECT {', '.join(parts)} FROM {_reader(path)}"


def _litellm_select(path: Path, columns: dict[str, str]) -> str:
    missing = [c for c in ("startTime", "prompt_tokens", "completion_tokens") if c not in columns]
    if missing or not ({"model", "model_group"} & set(columns)):
        raise UsageError(f"{path}: not a LiteLLM spend-log export (missing {', '.join(missing) or 'model'})")

    def col(name: str) -> str:
        return f'"{name}"' if name in columns else "NULL"

    tenant = (
        f"coalesce(nullif({col('team_id')}, ''), nullif({col('user')}, ''), nullif({col('end_user')}, ''), "
        f"nullif({col('api_key')}, ''), 'unknown')"
    )
    cached = (
        f"TRY_CAST(json_extract_string({col('metadata')}, "
        "'$.usage_object.prompt_tokens_details.cached_tokens') AS BIGINT)"
        if "metadata" in columns
        else "NULL::BIGINT"
    )
    ttft = (
        f"epoch_ms(CAST({col('completionStartTime')} AS TIMESTAMPTZ)) - "
        f"epoch_ms(CAST({col('startTime')} AS TIMESTAMPTZ))"
        if "completionStartTime" in columns
        else "NULL"
    )
    return (
        f'SELECT CAST(CAST("startTime" AS TIMESTAMPTZ) AS TIMESTAMP) AS ts, '
        f"CAST(coalesce(nullif({col('model_group')}, ''), {col('model')}) AS VARCHAR) AS model, "
        f"CAST({tenant} AS VARCHAR) AS tenant, "
        f"CAST(prompt_tokens AS BIGINT) AS prompt_tokens, CAST(completion_tokens AS BIGINT) AS completion_tokens, "
        f"CAST(coalesce(nullif({col('status')}, ''), 'success') AS VARCHAR) AS status, "
        f"{cached} AS cached_prompt_tokens, CAST({ttft} AS DOUBLE) AS ttft_ms, "
        f"CAST({col('request_id')} AS VARCHAR) AS request_id FROM {_reader(path)}"
    )


def register_records(
    con: duckdb.DuckDBPyConnection, paths: Sequence[Path], fmt: RecordFormat = "auto"
) -> RecordSource | None:
    """Create the view `records` (the schema above, ts as naive UTC) over every file; None without files."""
    if not paths:
        return None
    selects: list[str] = []
    formats: list[str] = []
    has_cached = has_ttft = has_id = False
    for path in paths:
        columns = _columns(con, path)
        kind = fmt if fmt != "auto" else ("litellm" if "startTime" in columns else "fabric")
        selects.append(_litellm_select(path, columns) if kind == "litellm" else _fabric_select(path, columns))
        formats.append(kind)
        has_cached |= "cached_prompt_tokens" in columns or (kind == "litellm" and "metadata" in columns)
        has_ttft |= "ttft_ms" in columns or "completionStartTime" in columns
        has_id |= "request_id" in columns
    union = " UNION ALL BY NAME ".join(f"({s})" for s in selects)
    if has_id:
        # the natural key: one request exported twice (overlapping log files) counts once
        union = (
            f"WITH u AS ({union}) SELECT * FROM u WHERE request_id IS NULL UNION ALL "
            "SELECT * FROM u WHERE request_id IS NOT NULL "
            "QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY ts) = 1"
        )
    con.execute(f"CREATE OR REPLACE TEMP VIEW records AS {union}")
    return RecordSource(list(paths), formats, has_cached, has_ttft, has_id)
