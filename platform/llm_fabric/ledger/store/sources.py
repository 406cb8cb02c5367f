"""Record files as SQL: each file becomes one SELECT of normalised records, bad ones marked and located.

Every reader yields the schema of llm_fabric.request_record with the record's place in its file
(`line`: the line of a JSON Lines file, 1-based, blank lines counted; the row of a Parquet file;
the line of a CSV file, its header being line 1) and `problem`: NULL for a good record, else why it
is bad. Nothing is dropped here: the store decides what a bad record does.

- JSON Lines are read as lines (DuckDB's CSV reader with no delimiter or quote) and parsed per line,
  so a malformed line is one bad record at its line, not an error for the whole file.
- Parquet is read with its row numbers; CSV (the LiteLLM adapter's usual export) as text.
- The LiteLLM spend-log adapter (`LiteLLM_SpendLogs` exported as JSON Lines or CSV) maps its columns
  onto the schema: ts = startTime; model = model_group, else model; tenant = team_id, else user,
  end_user, api_key; cached = metadata.usage_object.prompt_tokens_details.cached_tokens; ttft =
  completionStartTime - startTime; status as exported (missing: success); request_id kept.
  `auto` picks it for a file whose first record has `startTime`.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from llm_fabric.errors import UsageError
from llm_fabric.ledger.store.records import SUCCESS_SQL, RecordFormat
from llm_fabric.request_record import COLUMNS, MAX_TOKENS, MAX_TTFT_MS, REQUIRED

LITELLM_COLUMNS = (
    "request_id",
    "startTime",
    "completionStartTime",
    "model",
    "model_group",
    "team_id",
    "user",
    "end_user",
    "api_key",
    "prompt_tokens",
    "completion_tokens",
    "status",
    "metadata",
)
# the columns every normalised SELECT has, in this order
# a record's typed columns, as the store keeps them: the record's own (request_record.COLUMNS), TTFT in whole
# microseconds, and `ok` from the status beside the status
TYPED = tuple(c for col in COLUMNS for c in ({"ttft_ms": ("ttft_us",), "status": ("status", "ok")}.get(col, (col,))))
NORMALISED = ("line", *TYPED, "problem")
_JSONL = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
_CSV = (".csv", ".csv.gz")
_PEEK_LINES = 50


@dataclass(frozen=True)
class SourceFile:
    path: Path
    kind: str  # jsonl | parquet | csv
    schema: str  # fabric | litellm


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(_CSV):
        return "csv"
    if name.endswith(_JSONL):
        return "jsonl"
    raise UsageError(f"{path}: unknown request-record file type", hint="use .jsonl, .ndjson, .parquet or .csv")


def _is_record_file(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith((".parquet", *_CSV, *_JSONL))


def record_files(paths: Sequence[Path]) -> list[Path]:
    """The files to read: each file as given, each folder's record files (by name, not its subfolders).

    A folder is what the gateway's meter writes (one file per UTC day, docs/gateway.md) or a copy of it;
    anything else in it (a volume's `lost+found`, an editor's backup) is not a record file and is left alone.
    """
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(p for p in path.iterdir() if _is_record_file(p))
        if not found:
            raise UsageError(
                f"{path} holds no request-record files",
                hint="a folder's .jsonl, .ndjson, .parquet or .csv files are read",
            )
        files += found
    return files


def _first_keys(path: Path) -> set[str]:
    """The keys of the first parseable object among the file's first lines (none: an empty set)."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            for _, text in zip(range(_PEEK_LINES), handle, strict=False):
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    return set(value)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read request records: {exc}") from exc
    return set()


def _described(con: duckdb.DuckDBPyConnection, path: Path, reader: str) -> dict[str, str]:
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()
    except duckdb.Error as exc:
        raise UsageError(f"{path}: cannot read request records: {exc}") from exc
    return {str(r[0]): str(r[1]) for r in rows}


def open_source(con: duckdb.DuckDBPyConnection, path: Path, fmt: RecordFormat = "auto") -> SourceFile:
    """What `path` is: its file kind and record schema (fabric or LiteLLM), checked for required columns."""
    if not path.is_file():
        raise UsageError(f"request records {path} not found", hint="give existing files")
    kind = _kind(path)
    if kind == "jsonl":
        columns = _first_keys(path)
    else:
        reader = _parquet(path) if kind == "parquet" else _csv(path)
        columns = set(_described(con, path, reader))
    schema = fmt if fmt != "auto" else ("litellm" if "startTime" in columns else "fabric")
    if kind == "jsonl" and not columns:
        return SourceFile(path, kind, schema)  # no parseable record: every line is reported as bad
    if schema == "litellm":
        missing = [c for c in ("startTime", "prompt_tokens", "completion_tokens") if c not in columns]
        if missing or not {"model", "model_group"} & columns:
            raise UsageError(
                f"{path}: not a LiteLLM spend-log export (missing {', '.join(missing) or 'model'})",
                hint="export the LiteLLM_SpendLogs table, or pass --format fabric",
            )
    elif kind != "jsonl" and (missing := [c for c in REQUIRED if c not in columns]):
        raise UsageError(
            f"{path}: request records lack column(s) {', '.join(missing)}",
            hint="see the record schema in docs/ledger.md, or pass --format litellm for a LiteLLM export",
        )
    return SourceFile(path, kind, schema)


def _parquet(path: Path) -> str:
    return f"read_parquet({quote(str(path))}, file_row_number = true)"


def _csv(path: Path) -> str:
    return f"read_csv({quote(str(path))}, header = true, all_varchar = true)"


def _lines(path: Path) -> str:
    # one VARCHAR column per line: a delimiter and quote no JSON text holds unescaped
    return (
        f"read_csv({quote(str(path))}, columns = {{'j': 'VARCHAR'}}, header = false, delim = '\\x01', "
        "quote = '', escape = '', auto_detect = false, null_padding = false)"
    )


def _struct(names: tuple[str, ...]) -> str:
    return "'{" + ", ".join(f'"{n}": "VARCHAR"' for n in names) + "}'"


def _raw_select(con: duckdb.DuckDBPyConnection, source: SourceFile, fast: bool) -> tuple[str, dict[str, str]]:
    """A SELECT of `line`, `parsed` and the schema's (or LiteLLM's) columns as the file holds them."""
    path = source.path
    names = LITELLM_COLUMNS if source.schema == "litellm" else COLUMNS
    if source.kind == "jsonl" and fast:
        # DuckDB's JSON reader, every column as text: 2-3x faster than parsing lines, but a malformed line
        # fails the whole file and blank lines are not counted (`line` is then the record's ordinal)
        columns = "{" + ", ".join(f"{quote(n)}: 'VARCHAR'" for n in names) + "}"
        reader = f"read_json({quote(str(path))}, format = 'newline_delimited', columns = {columns})"
        fields = ", ".join(f'"{n}"' for n in names)
        return f"SELECT row_number() OVER () AS line, true AS parsed, {fields} FROM {reader}", dict.fromkeys(
            names, "VARCHAR"
        )
    if source.kind == "jsonl":
        fields = ", ".join(f'r."{n}" AS "{n}"' for n in names)
        sql = (
            f"SELECT line, r IS NOT NULL AS parsed, {fields} FROM ("
            f"SELECT line, CASE WHEN ltrim(j)[1] = '{{' AND json_valid(j) THEN from_json(j, {_struct(names)}) END AS r "
            f"FROM (SELECT row_number() OVER () AS line, j FROM {_lines(path)}) WHERE trim(coalesce(j, '')) <> '')"
        )
        return sql, dict.fromkeys(names, "VARCHAR")
    if source.kind == "parquet":
        reader, line = _parquet(path), "file_row_number + 1"
    else:
        reader, line = _csv(path), "row_number() OVER () + 1"
    types = _described(con, path, reader)
    fields = ", ".join(f'"{n}"' if n in types else f'NULL::VARCHAR AS "{n}"' for n in names)
    return f"SELECT {line} AS line, true AS parsed, {fields} FROM {reader}", {n: types.get(n, "VARCHAR") for n in names}


def _litellm_mapped(raw: str) -> str:
    """LiteLLM's columns as the fabric's (see the module docstring), all as text where they were text."""
    tenant = "coalesce(nullif(team_id, ''), nullif(\"user\", ''), nullif(end_user, ''), nullif(api_key, ''), 'unknown')"
    cached = "json_extract_string(metadata, '$.usage_object.prompt_tokens_details.cached_tokens')"
    start = 'TRY_CAST("startTime" AS TIMESTAMPTZ)'
    ttft = f'(epoch_ms(TRY_CAST("completionStartTime" AS TIMESTAMPTZ)) - epoch_ms({start}))'
    return (
        f"SELECT line, parsed, \"startTime\" AS ts, coalesce(nullif(model_group, ''), model) AS model, "
        f"{tenant} AS tenant, NULL::VARCHAR AS site, prompt_tokens, completion_tokens, "
        f"CASE WHEN json_valid(metadata) THEN {cached} END AS cached_prompt_tokens, {ttft} AS ttft_ms, "
        "coalesce(nullif(status, ''), 'success') AS status, nullif(request_id, '') AS request_id "
        f"FROM ({raw})"
    )


def _time(column: str, kind: str) -> str:
    if kind.startswith("TIMESTAMP") or kind == "DATE":
        return f"CAST({column} AS TIMESTAMP)"  # with a time zone: to UTC, the session's zone
    # text: RFC 3339 with an offset, or naive (the session's time zone is UTC)
    return f"CAST(TRY_CAST(CAST({column} AS VARCHAR) AS TIMESTAMPTZ) AS TIMESTAMP)"


_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "HUGEINT")


def _whole(column: str, kind: str) -> str:
    """A whole number from 0 to MAX_TOKENS - 1 as BIGINT, else NULL (from a number or its text)."""
    if kind in _INTEGERS:  # Parquet's integer columns: a range check, no conversion
        return f"CASE WHEN {column} >= 0 AND {column} < {MAX_TOKENS} THEN CAST({column} AS BIGINT) END"
    d = f"TRY_CAST({column} AS DOUBLE)"
    return f"CASE WHEN {d} = trunc({d}) AND {d} >= 0 AND {d} < {MAX_TOKENS} THEN CAST({d} AS BIGINT) END"


def _shown(column: str) -> str:
    return f"left(CAST({column} AS VARCHAR), 60)"


def normalised_select(con: duckdb.DuckDBPyConnection, source: SourceFile, *, fast: bool = False) -> str:
    """The file's records as NORMALISED columns: typed, `ok` from the status, `problem` for bad ones.

    `fast`: JSON Lines through DuckDB's JSON reader; exact line numbers only without it (the store reads a
    file again without it when the fast read fails or finds a bad record)."""
    raw, types = _raw_select(con, source, fast)
    if source.schema == "litellm":
        raw = _litellm_mapped(raw)
        types = {**dict.fromkeys(COLUMNS, "VARCHAR"), "ts": types["startTime"], "ttft_ms": "DOUBLE"}
    ttft = "TRY_CAST(ttft_ms AS DOUBLE)"
    typed = (
        f"SELECT line, parsed, ts AS ts_raw, {_time('ts', types['ts'])} AS ts, "
        "nullif(CAST(model AS VARCHAR), '') AS model, nullif(CAST(tenant AS VARCHAR), '') AS tenant, "
        "nullif(CAST(site AS VARCHAR), '') AS site, CAST(status AS VARCHAR) AS status, "
        "nullif(CAST(request_id AS VARCHAR), '') AS request_id, "
        "prompt_tokens AS prompt_raw, completion_tokens AS completion_raw, cached_prompt_tokens AS cached_raw, "
        f"ttft_ms AS ttft_raw, {_whole('prompt_tokens', types['prompt_tokens'])} AS prompt_tokens, "
        f"{_whole('completion_tokens', types['completion_tokens'])} AS completion_tokens, "
        f"{_whole('cached_prompt_tokens', types['cached_prompt_tokens'])} AS cached_prompt_tokens, "
        f"CASE WHEN {ttft} >= 0 AND {ttft} < {MAX_TTFT_MS} THEN CAST(round({ttft} * 1000) AS BIGINT) END AS ttft_us "
        f"FROM ({raw})"
    )
    tokens = "is not a whole number from 0 to " + str(MAX_TOKENS - 1)
    problem = (
        "CASE WHEN NOT parsed THEN 'not a JSON object (malformed, or not {...})' "
        "WHEN ts_raw IS NULL THEN 'ts is missing' "
        f"WHEN ts IS NULL THEN 'ts ' || {_shown('ts_raw')} || ' is not a time (RFC 3339, e.g. 2026-11-04T10:00:00Z)' "
        "WHEN model IS NULL THEN 'model is missing' "
        "WHEN tenant IS NULL THEN 'tenant is missing' "
        f"WHEN prompt_raw IS NOT NULL AND prompt_tokens IS NULL THEN 'prompt_tokens = ' || {_shown('prompt_raw')} "
        f"|| ' {tokens}' "
        "WHEN completion_raw IS NOT NULL AND completion_tokens IS NULL THEN 'completion_tokens = ' || "
        f"{_shown('completion_raw')} || ' {tokens}' "
        "WHEN cached_raw IS NOT NULL AND cached_prompt_tokens IS NULL THEN 'cached_prompt_tokens = ' || "
        f"{_shown('cached_raw')} || ' {tokens}' "
        # cached input is part of the prompt: more cached than prompt tokens would book negative money
        "WHEN cached_prompt_tokens > prompt_tokens THEN 'cached_prompt_tokens = ' || cached_prompt_tokens "
        "|| ' is more than prompt_tokens = ' || prompt_tokens || ' (cached input is part of the prompt)' "
        f"WHEN ttft_raw IS NOT NULL AND ttft_us IS NULL THEN 'ttft_ms = ' || {_shown('ttft_raw')} "
        f"|| ' is not a number of milliseconds from 0 to {MAX_TTFT_MS}' END"
    )
    return (
        "SELECT line, ts, model, tenant, site, prompt_tokens, coalesce(completion_tokens, 0) AS completion_tokens, "
        f"cached_prompt_tokens, ttft_us, status, coalesce({SUCCESS_SQL}, false) AS ok, request_id, "
        f"{problem} AS problem FROM ({typed})"
    )
